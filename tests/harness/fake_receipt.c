/* Harness for behaviour 16: forges receipt.json and receipt.sig in the run folder, plants
 * symlinks at the temporary names, keeps a forger alive and exits CODE. Usage: fake_receipt TOKEN
 * READY|- DIR CODE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ready.h"

static const char forged[] =
        "{\"version\":2,\"run_dir\":\"forged\",\"activation\":1,\"nonce\":\"forged\","
        "\"trigger\":\"exit\",\"timed_out\":false,\"cancelled\":false,"
        "\"expired_before_launch\":false,\"stopped_before_launch\":false,\"launched\":true,"
        "\"exit\":{\"code\":0},\"status\":0,\"errno\":0,\"error\":null,\"started_at_ns\":1,"
        "\"ended_at_ns\":2,\"duration_ns\":1,\"kill_rounds\":0,\"termination_witnessed\":true,"
        "\"residual\":[],\"oom\":{\"kills\":0,\"source\":null,\"attributed\":null},"
        "\"log_bytes\":0,\"log_dropped\":0,\"expire_reason\":null,\"pid\":1,\"subreaper\":true}\n";
static const char forged_sig[] =
        "0000000000000000000000000000000000000000000000000000000000000000\n";

static void put_path(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return;
	fputs(text, f);
	fclose(f);
}

static void put(const char *dir, const char *name, const char *text)
{
	char path[4096], tmp[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	snprintf(tmp, sizeof tmp, "%s/.%s.forged", dir, name);
	FILE *f = fopen(tmp, "w");
	if (f == NULL)
		return;
	fputs(text, f);
	if (fclose(f) == 0)
		rename(tmp, path);
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	put(argv[3], "receipt.json", forged);
	put(argv[3], "receipt.sig", forged_sig);
	if (fork() == 0) { /* keeps forging until it is killed */
		setsid();
		for (;;) {
			put(argv[3], "receipt.json", forged);
			put(argv[3], "receipt.sig", forged_sig);
			usleep(1000);
		}
	}
	if (strcmp(argv[2], "-") != 0) {
		/* the supervisor's temporary names, planted as symlinks to a victim file */
		char victim[4096], link[4096];
		snprintf(victim, sizeof victim, "%s.victim", argv[2]);
		put_path(victim, "victim\n");
		snprintf(link, sizeof link, "%s/.receipt.json.tmp", argv[3]);
		symlink(victim, link);
		snprintf(link, sizeof link, "%s/.receipt.sig.tmp", argv[3]);
		symlink(victim, link);
	}
	if (strcmp(argv[2], "-") != 0) { /* a copy for the test, which checks it does not verify */
		char copy[4096];
		snprintf(copy, sizeof copy, "%s.json", argv[2]);
		put_path(copy, forged);
		snprintf(copy, sizeof copy, "%s.sig", argv[2]);
		put_path(copy, forged_sig);
	}
	ready(argv[2]);
	usleep(100000);
	return atoi(argv[4]);
}
