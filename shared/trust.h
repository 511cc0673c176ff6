/* The sandbox's secret and what is derived from it (docs/supervision.md, "Trust"): a sans-I/O
 * kernel shared by the host and the agent's keeper. The secret never crosses the channel after
 * it is set up; the host proves that the sandbox's keeper holds it (AUTH), signs each run
 * request (so a relay cannot change the harness, its user or its deadline), and both sides
 * derive the run's receipt key from the secret and the run's nonce (so no key is ever sent).
 * Every value is an HMAC-SHA256 under the secret of a fixed label and the data: the labels
 * keep the three uses apart, so an answer to one can never serve as another. */
#ifndef SBX_TRUST_H
#define SBX_TRUST_H

#include <stddef.h>
#include <stdint.h>

#define SBX_SECRET_LEN 32
#define SBX_NONCE_LEN 16
#define SBX_MAC_LEN 32

/* The keeper's answer to an AUTH challenge. */
void sbx_trust_auth(const uint8_t secret[SBX_SECRET_LEN], const uint8_t nonce[SBX_NONCE_LEN],
                    uint8_t out[SBX_MAC_LEN]);

/* The MAC of a run request: over the message bytes before its MAC field (the last field). */
void sbx_trust_run_mac(const uint8_t secret[SBX_SECRET_LEN], const uint8_t *req, size_t len,
                       uint8_t out[SBX_MAC_LEN]);

/* The receipt key of the run whose request carried nonce. */
void sbx_trust_run_key(const uint8_t secret[SBX_SECRET_LEN], const uint8_t nonce[SBX_NONCE_LEN],
                       uint8_t out[SBX_MAC_LEN]);

/* 1 when the two MACs are equal; time independent of where they differ. */
int sbx_trust_equal(const uint8_t a[SBX_MAC_LEN], const uint8_t b[SBX_MAC_LEN]);

#endif
