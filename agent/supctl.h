/* The serve loop's side of harness supervision: launching a detached supervisor, writing the
 * markers it watches, and reading its files. Each handler turns a REQUEST payload into a
 * RESPONSE payload, like the probes. */
#ifndef SBX_AGENT_SUPCTL_H
#define SBX_AGENT_SUPCTL_H

#include <stddef.h>
#include <stdint.h>

#include "msg.h"

/* Launches the supervisor a run request describes, with the receipt key given (derived by the
 * keeper: agent/keeper.h); a KEY field in the request is refused (keys never cross the
 * channel). */
void sbx_supctl_run(const uint8_t *req, size_t len, const uint8_t *key, size_t key_len,
                    struct sbx_msgw *w);
void sbx_supctl_signal(const uint8_t *req, size_t len, struct sbx_msgw *w);
void sbx_supctl_status(const uint8_t *req, size_t len, struct sbx_msgw *w);
void sbx_supctl_read(const uint8_t *req, size_t len, struct sbx_msgw *w);
void sbx_supctl_rearm(const uint8_t *req, size_t len, struct sbx_msgw *w);
void sbx_supctl_close(const uint8_t *req, size_t len, struct sbx_msgw *w);

#endif
