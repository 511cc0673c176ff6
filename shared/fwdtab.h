/* The connection streams of TCP forwarding as a table, sans-I/O (docs/forwarding.md,
 * section 3): which ids are open, who opened them, credit per connection and direction,
 * END once each way, the reset handshake, the count per listener. Both ends drive it; the
 * host feeds it the agent's frames as an attacker's, so every rule the peer can break
 * returns -1 with a `protocol` error. No allocation: the caller gives the slots. */
#ifndef SBX_FWDTAB_H
#define SBX_FWDTAB_H

#include <stddef.h>
#include <stdint.h>

#include "credit.h"
#include "err.h"
#include "fwdmsg.h"

enum sbx_fwd_state {
	SBX_FWD_OPEN = 1,
	SBX_FWD_RESET_SENT = 2, /* held until the peer's RESET answers ours */
};

struct sbx_fwd_conn {
	uint32_t id;
	uint32_t listener; /* the FWD_LISTEN's id (agent-opened), or the caller's forward index */
	uint8_t state;
	uint8_t sent_end, got_end;
	struct sbx_credit_tx tx; /* what we may still send on it */
	struct sbx_credit_rx rx; /* what the peer may still send */
	void *user;              /* the caller's socket state */
};

struct sbx_fwd_tab {
	struct sbx_fwd_conn *c; /* packed: c[0..n) in use; a drop moves the last into the hole */
	size_t cap, n;
	enum sbx_fwd_from self; /* which side this table is */
};

void sbx_fwdtab_init(struct sbx_fwd_tab *t, struct sbx_fwd_conn *slots, size_t cap,
                     enum sbx_fwd_from self);

/* The connection with that id, or NULL. Pointers stay valid until the next drop. */
struct sbx_fwd_conn *sbx_fwdtab_find(struct sbx_fwd_tab *t, uint32_t id);

/* Open connections of a listener (one reset and waiting for its answer is not counted). */
size_t sbx_fwdtab_count(const struct sbx_fwd_tab *t, uint32_t listener);

/* Opens a connection: ours (from == t->self, we accepted it and send OPEN) or the peer's (an
 * OPEN arrived). Returns 0 with *out set. Returns 1 when the listener already has max open
 * connections or the table is full: for ours nothing is kept (refuse the socket); for the
 * peer's the caller answers RESET (EMFILE), and *out is the slot held in the reset state
 * until the peer's RESET answers, or NULL when the table is full (then the peer's DATA on
 * that id breaks the session: an agent that fills the table ignores resets). -1 with *e
 * (protocol) for a peer's id that is malformed (sbx_fwdmsg_id_ok) or already open, or
 * (SBX_EUSAGE) for an own id of the wrong shape or in use. */
int sbx_fwdtab_open(struct sbx_fwd_tab *t, enum sbx_fwd_from from, uint32_t id, uint32_t listener,
                    size_t max, struct sbx_fwd_conn **out, struct sbx_err *e);

/* A DATA frame of len bytes (END when end) arrived on id. Returns 0: deliver the bytes to the
 * socket of *out, and after END shut its write side; 1: drop them (we reset it, the peer has
 * not seen that yet); -1 with *e (protocol): an unknown id, DATA after END, beyond credit. */
int sbx_fwdtab_on_data(struct sbx_fwd_tab *t, uint32_t id, size_t len, int end,
                       struct sbx_fwd_conn **out, struct sbx_err *e);

/* n received bytes were written to the socket; returns the grant to send back now (0: none
 * yet). */
uint64_t sbx_fwdtab_consumed(struct sbx_fwd_conn *c, uint64_t n);

/* A CREDIT of n bytes arrived on id: 0 (an unknown id is ignored: credit may trail a closed
 * connection), -1 with *e (protocol) when it would raise the credit above the window. */
int sbx_fwdtab_on_credit(struct sbx_fwd_tab *t, uint32_t id, uint64_t n, struct sbx_err *e);

/* How many of want bytes may be read from the socket and sent now (the credit taken); 0
 * after our END or a reset. */
size_t sbx_fwdtab_take(struct sbx_fwd_conn *c, size_t want);

/* We sent END (the socket read 0). */
void sbx_fwdtab_sent_end(struct sbx_fwd_conn *c);

/* 1 when both ENDs have passed: once the caller has written out what it holds, it closes the
 * socket and drops the connection. */
int sbx_fwdtab_finished(const struct sbx_fwd_conn *c);

/* We reset it (our socket failed or was reset): the caller sends RESET; the slot is held,
 * dropping what still arrives, until the peer's RESET answers. */
void sbx_fwdtab_reset(struct sbx_fwd_conn *c);

/* A RESET arrived on id. Returns 1 when the caller must reset its socket (SO_LINGER 0) and
 * answer with a RESET (the connection was open on our side); 0 otherwise (it answered ours,
 * or the id is unknown). Either way the id is forgotten; *user gets the socket state of a
 * connection that was known (NULL otherwise), which the caller then closes. */
int sbx_fwdtab_on_reset(struct sbx_fwd_tab *t, uint32_t id, void **user);

/* Forgets c (its slot is reused). */
void sbx_fwdtab_drop(struct sbx_fwd_tab *t, struct sbx_fwd_conn *c);

#endif
