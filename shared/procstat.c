/* /proc/PID/stat, parsed once for everyone (shared/procstat.h). */
#include "procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sbx_proc_stat(pid_t pid, uint64_t *start, pid_t *ppid, char *state)
{
	char path[32], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	ssize_t n;
	do
		n = read(fd, buf, sizeof buf - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* comm may hold ')' and spaces: the fields start after the LAST ')'. */
	char *p = strrchr(buf, ')');
	if (p == NULL)
		return -1;
	p++;
	uint64_t v[20]; /* fields 3..22 */
	char st = '?';
	for (int f = 3; f <= 22; f++) {
		while (*p == ' ')
			p++;
		if (*p == '\0')
			return -1;
		if (f == 3) {
			st = *p;
		} else {
			char *end;
			v[f - 3] = strtoull(p, &end, 10);
			if (end == p && *p != '-')
				return -1;
		}
		while (*p != ' ' && *p != '\0')
			p++;
	}
	if (start != NULL)
		*start = v[22 - 3];
	if (ppid != NULL)
		*ppid = (pid_t)v[4 - 3];
	if (state != NULL)
		*state = st;
	return 0;
}
