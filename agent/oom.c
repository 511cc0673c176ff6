/* OOM evidence from cgroup counters. The counter is cgroup-wide (the sandbox may run other
 * things in it), so a delta is evidence about the run only in combination with who died of an
 * unexplained SIGKILL; hence the attribution levels. */
#include "oom.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reads "oom_kill N" from a flat-keyed cgroup file; -1 when absent or unreadable. */
static int read_counter(const char *file, uint64_t *out)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[2048];
	size_t n = 0;
	ssize_t r;
	while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	for (char *line = buf; line != NULL && *line != '\0';) {
		char *nl = strchr(line, '\n');
		if (nl != NULL)
			*nl = '\0';
		if (strncmp(line, "oom_kill ", 9) == 0) {
			char *end;
			*out = strtoull(line + 9, &end, 10);
			return end == line + 9 ? -1 : 0;
		}
		line = nl != NULL ? nl + 1 : NULL;
	}
	return -1;
}

static int try_file(struct sbx_oom *o, enum sbx_oom_source src, const char *root, const char *path,
                    const char *name)
{
	if (strcmp(path, "/") == 0)
		path = "";
	int n = snprintf(o->file, sizeof o->file, "%s%s/%s", root, path, name);
	if (n < 0 || (size_t)n >= sizeof o->file || read_counter(o->file, &o->before) != 0)
		return -1;
	o->source = src;
	return 0;
}

void sbx_oom_begin(struct sbx_oom *o)
{
	memset(o, 0, sizeof *o);
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (f == NULL)
		return;
	char line[1024], v2[512] = "", v1[512] = "";
	int have_v2 = 0, have_v1 = 0;
	while (fgets(line, sizeof line, f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':');
		char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
		if (c2 == NULL || strlen(c2 + 1) >= sizeof v2)
			continue;
		*c2 = '\0';
		if (strcmp(line, "0:") == 0 && c1 + 1 == c2) { /* "0::PATH" */
			strcpy(v2, c2 + 1), have_v2 = 1;
			continue;
		}
		for (char *t = strtok(c1 + 1, ","); t != NULL; t = strtok(NULL, ","))
			if (strcmp(t, "memory") == 0)
				strcpy(v1, c2 + 1), have_v1 = 1;
	}
	fclose(f);
	if (have_v2 && (try_file(o, SBX_OOM_V2, "/sys/fs/cgroup", v2, "memory.events") == 0 ||
	                try_file(o, SBX_OOM_V2, "/sys/fs/cgroup", v2, "memory.events.local") == 0))
		return;
	/* Docker on v1 without a cgroup namespace mounts the container's own cgroup at the
	 * controller's root while /proc/self/cgroup names the host path: try the root too. */
	if (have_v1 &&
	    (try_file(o, SBX_OOM_V1, "/sys/fs/cgroup/memory", v1, "memory.oom_control") == 0 ||
	     try_file(o, SBX_OOM_V1, "/sys/fs/cgroup/memory", "/", "memory.oom_control") == 0))
		return;
	memset(o, 0, sizeof *o);
}

uint64_t sbx_oom_kills(const struct sbx_oom *o)
{
	uint64_t now;
	if (o->source == SBX_OOM_NONE || read_counter(o->file, &now) != 0 || now < o->before)
		return 0;
	return now - o->before;
}

const char *sbx_oom_source_name(const struct sbx_oom *o)
{
	return o->source == SBX_OOM_V2   ? "cgroup-v2"
	       : o->source == SBX_OOM_V1 ? "cgroup-v1"
	                                 : "none";
}

const char *sbx_oom_attribute(uint64_t kills, int harness_sigkilled, int descendant_sigkilled)
{
	if (kills == 0)
		return "none";
	if (harness_sigkilled)
		return "harness";
	return descendant_sigkilled ? "descendant" : "suspected";
}
