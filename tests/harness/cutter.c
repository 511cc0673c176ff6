/* cutter MODE UP DOWN -- ARGV...: an exec channel that breaks. Runs ARGV with pipes and relays
 * bytes both ways; after UP bytes host->agent (or DOWN bytes agent->host; -1 = never) it cuts:
 *   eof   closes the agent's stdin and our stdout, then waits for the agent to exit;
 *   kill  SIGKILLs the agent, closes our stdout, waits.
 * With UP = DOWN = -1 it relays everything and writes "up N down M" at the end to the file
 * $SBX_CUTTER_LOG, so a test can learn a transfer's byte counts and then cut at chosen
 * points, with the peak RSS of the agent and its transfer processes (the benchmark's). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_all(int fd, const char *b, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 6 || strcmp(argv[4], "--") != 0) {
		fprintf(stderr, "usage: cutter eof|kill UP DOWN -- ARGV...\n");
		return 2;
	}
	int kill_mode = strcmp(argv[1], "kill") == 0;
	long long up_lim = atoll(argv[2]), down_lim = atoll(argv[3]);
	signal(SIGPIPE, SIG_IGN);
	int in[2], out[2];
	if (pipe(in) != 0 || pipe(out) != 0)
		return 3;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]), close(in[1]), close(out[0]), close(out[1]);
		execvp(argv[5], argv + 5);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	long long up = 0, down = 0;
	int host_open = 1, agent_open = 1, cut = 0;
	char buf[65536];
	while (agent_open && !cut) {
		struct pollfd p[2] = {{host_open ? 0 : -1, POLLIN, 0}, {out[0], POLLIN, 0}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents) {
			size_t want = sizeof buf;
			if (up_lim >= 0 && (long long)want > up_lim - up)
				want = (size_t)(up_lim - up);
			ssize_t n = want > 0 ? read(0, buf, want) : 0;
			if (n > 0) {
				write_all(in[1], buf, (size_t)n);
				up += n;
			}
			if (up_lim >= 0 && up >= up_lim)
				cut = 1;
			else if (n <= 0) {
				host_open = 0;
				close(in[1]);
			}
		}
		if (!cut && p[1].revents) {
			size_t want = sizeof buf;
			if (down_lim >= 0 && (long long)want > down_lim - down)
				want = (size_t)(down_lim - down);
			ssize_t n = want > 0 ? read(out[0], buf, want) : 0;
			if (n > 0) {
				write_all(1, buf, (size_t)n);
				down += n;
			}
			if (down_lim >= 0 && down >= down_lim)
				cut = 1;
			else if (n <= 0)
				agent_open = 0;
		}
	}
	if (cut) {
		if (kill_mode)
			kill(pid, SIGKILL);
		close(1);
		if (host_open)
			close(in[1]);
		/* Drain the agent's output so it never blocks on a full pipe while ending. */
		ssize_t n;
		while ((n = read(out[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
			;
	}
	int st;
	waitpid(pid, &st, 0);
	const char *log = getenv("SBX_CUTTER_LOG");
	FILE *f = log != NULL && up_lim < 0 && down_lim < 0 ? fopen(log, "w") : NULL;
	if (f != NULL) {
		struct rusage ru;
		getrusage(RUSAGE_CHILDREN, &ru);
		/* The agent's and its waited-for children's (the transfer process's) peak. */
		fprintf(f, "up %lld down %lld maxrss_kib %ld\n", up, down, ru.ru_maxrss);
		fclose(f);
	}
	return cut ? 0 : (WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}
