/* The run's receipt: one line of JSON with a fixed key order, its HMAC-SHA256 signature, and
 * the atomic write (tmp file, fsync, rename, no symlink followed) every session file uses. */
#ifndef SBX_AGENT_RECEIPT_H
#define SBX_AGENT_RECEIPT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define SBX_RECEIPT_RESIDUAL_MAX 32

struct sbx_receipt_proc {
	int pid;
	char cmdline[256];
};

struct sbx_receipt {
	const char *run_dir;
	int64_t activation;
	char nonce[33];
	const char *trigger; /* exit deadline expire stop signal runner_failed not_started */
	int timed_out, cancelled, expired_before_launch, stopped_before_launch, launched;
	int exit_kind; /* 0: null, 1: {"code":N}, 2: {"signal":N} */
	int exit_value;
	int status;
	int err;
	char error[256];
	int64_t started_at_ns, ended_at_ns, duration_ns;
	int kill_rounds;
	int termination_witnessed;
	size_t nresidual; /* the first SBX_RECEIPT_RESIDUAL_MAX are listed */
	struct sbx_receipt_proc residual[SBX_RECEIPT_RESIDUAL_MAX];
	uint64_t oom_kills;
	const char *oom_source, *oom_attributed;
	int64_t log_bytes, log_dropped;
	char expire_reason[1024];
	int pid;
	int no_subreaper; /* the supervisor could not become the run's subreaper */
};

/* The receipt as one JSON line ending in "\n", malloc'd (NUL-terminated, *len without it);
 * NULL when out of memory. Strings: control characters as \u00XX, invalid UTF-8 bytes as '?'. */
char *sbx_receipt_format(const struct sbx_receipt *r, size_t *len);

/* Writes receipt.sig (64 hex digits of HMAC-SHA256(key, json), "\n") when key_len > 0, then
 * receipt.json, so a receipt.json in place always has its signature beside it. */
int sbx_receipt_write(int dirfd, const char *json, size_t len, const uint8_t *key, size_t key_len,
                      struct sbx_err *e);

#endif
