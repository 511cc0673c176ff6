/* The keeper: the one process of a sandbox that holds the sandbox's secret (shared/trust.h,
 * docs/supervision.md "Trust"). It answers the host's AUTH challenges, checks the host's MAC on
 * every run request and launches that run's supervisor with the receipt key it derives, so no
 * key ever crosses the channel and a process that took the agent's place can relay requests
 * but not forge or alter them. The secret is set once (SETUP) and never leaves the keeper's
 * memory (PR_SET_DUMPABLE 0: no ptrace, no /proc/PID/mem without CAP_SYS_PTRACE).
 *
 * Where it lives: in the sandbox's init (`sbx-agent init`, the ns runner and the containers sbx
 * made), in a daemon the first SETUP starts (sandboxes sbx did not make), or for one session in
 * the serve process itself (the local and qemu runners, where the sandbox is this machine).
 * Serve processes reach an init or daemon keeper over a unix socket, SBX_KEEPER_DIR/
 * SBX_KEEPER_SOCK in the first of SBX_SOCKET_DIRS (shared/proto.h) that holds one, with one request
 * per connection: [u32 length][message] each way, the message being the REQUEST payload itself. */
#ifndef SBX_AGENT_KEEPER_H
#define SBX_AGENT_KEEPER_H

#include <stddef.h>
#include <poll.h>
#include <stdint.h>

#include "msg.h"
#include "trust.h"

/* Run nonces remembered to refuse a replayed run request. */
#define SBX_KEEPER_NONCES 256

struct sbx_keeper {
	uint8_t secret[SBX_SECRET_LEN];
	int have;
	uint8_t used[SBX_KEEPER_NONCES][SBX_NONCE_LEN];
	unsigned nused;
};

/* Answers one request (AUTH, SETUP or SUP_RUN) into w, as a RESPONSE payload; a SUP_RUN
 * launches the run's supervisor before it returns. */
void sbx_keeper_answer(struct sbx_keeper *k, const uint8_t *req, size_t len, struct sbx_msgw *w);

/* The keeper's listening socket (non-blocking, close-on-exec), or -1 with a message. */
int sbx_keeper_listen(char *err, size_t cap);

/* The connections a keeper is reading requests from, one poll loop's worth: a client that
 * writes slowly or never holds a slot until its deadline, never the loop. A run request's MAC
 * and nonce are checked in the keeper's own process (the nonces it remembers live there); the
 * launch and the answer then happen in a child, so the loop never waits for either. */
#define SBX_KEEPER_CONNS 8
struct sbx_keeper_conns {
	struct sbx_keeper_conn {
		int fd;
		int64_t until;
		uint8_t hdr[4];
		uint8_t *buf; /* the request, once its length is known */
		size_t have, want;
	} c[SBX_KEEPER_CONNS];
	int home; /* a run starts in this folder (O_PATH fd; -1: where the keeper is) */
};

void sbx_keeper_conns_init(struct sbx_keeper_conns *cs, int home);

/* Fills pfd[0..SBX_KEEPER_CONNS] (lfd first, then the connections; -1 where unused) and
 * lowers *timeout (ms, -1 none) to the nearest deadline. */
void sbx_keeper_conns_poll(struct sbx_keeper_conns *cs, int lfd, struct pollfd *pfd, int *timeout);

/* Handles what poll found in pfd (as filled above): accepts, reads, answers. */
void sbx_keeper_conns_ready(struct sbx_keeper *k, struct sbx_keeper_conns *cs, int lfd,
                            const struct pollfd *pfd);

/* Sends req to the sandbox's keeper and writes its answer into w. 0, or -1 when no keeper
 * answers (errno ENOENT when there is no socket at all). */
int sbx_keeper_call(const uint8_t *req, size_t len, struct sbx_msgw *w);

/* Starts a keeper daemon holding secret: a detached process (its own session, no fds of the
 * caller's) listening on the keeper socket; returns once it listens. 0, or -1 with a message. */
int sbx_keeper_spawn(const uint8_t secret[SBX_SECRET_LEN], char *err, size_t cap);

#endif
