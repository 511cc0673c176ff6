/* The keeper's answers (agent/keeper.c) against requests a relay could forge, change or
 * replay: SETUP once, AUTH as the MAC of the nonce, and a run launched only for a request whose
 * MAC covers every field and whose nonce is new, with the key both sides derive. The launch
 * itself is stubbed here (it is the supervisor's, tested in test_supervise): this file's
 * sbx_supctl_run records what it was given. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "keeper.h"
#include "proto.h"
#include "trust.h"

static int launched;
static uint8_t launched_key[SBX_MAC_LEN];

void sbx_supctl_run(const uint8_t *req, size_t len, const uint8_t *key, size_t key_len,
                    struct sbx_msgw *w)
{
	(void)req, (void)len;
	launched++;
	memcpy(launched_key, key, key_len < sizeof launched_key ? key_len : sizeof launched_key);
	sbx_msgw_i64(w, SBX_T_STATUS, 0);
}

static const uint8_t secret[SBX_SECRET_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

static int64_t status_of(const uint8_t *p, size_t n, int64_t *err)
{
	struct sbx_field f;
	int64_t st = -1;
	*err = 0;
	if (sbx_msg_find(p, n, SBX_T_STATUS, &f) == 1)
		sbx_field_i64(&f, &st);
	if (sbx_msg_find(p, n, SBX_T_ERRNO, &f) == 1)
		sbx_field_i64(&f, err);
	return st;
}

static int64_t ask(struct sbx_keeper *k, const uint8_t *req, size_t len, int64_t *err,
                   struct sbx_field *mac)
{
	static uint8_t out[4096];
	struct sbx_msgw w;
	sbx_msgw_init(&w, out, sizeof out);
	sbx_keeper_answer(k, req, len, &w);
	if (mac != NULL && sbx_msg_find(out, w.len, SBX_T_MAC, mac) != 1)
		mac->len = 0;
	return status_of(out, w.len, err);
}

static size_t setup_req(uint8_t *b, size_t cap, const uint8_t *s)
{
	struct sbx_msgw w;
	sbx_msgw_init(&w, b, cap);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_SETUP);
	sbx_msgw_i64(&w, SBX_T_KEEP, 1);
	sbx_msgw_bytes(&w, SBX_T_SECRET, s, SBX_SECRET_LEN);
	return w.len;
}

/* A run request as the host writes it (host/supervision.c): fields, NONCE, then the MAC. */
static size_t run_req(uint8_t *b, size_t cap, const uint8_t nonce[SBX_NONCE_LEN],
                      const char *harness)
{
	struct sbx_msgw w;
	sbx_msgw_init(&w, b, cap);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_SUP_RUN);
	sbx_msgw_str(&w, SBX_T_RUN_DIR, "/s");
	sbx_msgw_str(&w, SBX_T_ARGV, harness);
	sbx_msgw_i64(&w, SBX_T_TIMEOUT_MS, 5000);
	sbx_msgw_bytes(&w, SBX_T_NONCE, nonce, SBX_NONCE_LEN);
	uint8_t mac[SBX_MAC_LEN];
	sbx_trust_run_mac(secret, w.buf, w.len, mac);
	sbx_msgw_bytes(&w, SBX_T_MAC, mac, sizeof mac);
	return w.len;
}

static struct sbx_keeper fresh(void)
{
	struct sbx_keeper k;
	memset(&k, 0, sizeof k);
	uint8_t b[128];
	int64_t err;
	assert_int_equal(ask(&k, b, setup_req(b, sizeof b, secret), &err, NULL), 0);
	return k;
}

static void setup_only_once(void **state)
{
	(void)state;
	struct sbx_keeper k = fresh();
	uint8_t other[SBX_SECRET_LEN] = {9};
	uint8_t b[128];
	int64_t err;
	assert_int_equal(ask(&k, b, setup_req(b, sizeof b, other), &err, NULL), SBX_ETRANSFER);
	assert_int_equal(err, EEXIST);
	assert_memory_equal(k.secret, secret, SBX_SECRET_LEN);
}

static void auth_answers_the_nonce(void **state)
{
	(void)state;
	struct sbx_keeper none;
	memset(&none, 0, sizeof none);
	uint8_t nonce[SBX_NONCE_LEN] = {7, 7, 7};
	uint8_t b[128];
	struct sbx_msgw w;
	sbx_msgw_init(&w, b, sizeof b);
	sbx_msgw_i64(&w, SBX_T_OP, SBX_OP_AUTH);
	sbx_msgw_bytes(&w, SBX_T_NONCE, nonce, sizeof nonce);
	int64_t err;
	struct sbx_field mac;
	assert_int_equal(ask(&none, b, w.len, &err, &mac), SBX_ETRANSFER);
	assert_int_equal(err, ENOKEY);
	struct sbx_keeper k = fresh();
	assert_int_equal(ask(&k, b, w.len, &err, &mac), 0);
	uint8_t want[SBX_MAC_LEN];
	sbx_trust_auth(secret, nonce, want);
	assert_int_equal(mac.len, SBX_MAC_LEN);
	assert_memory_equal(mac.val, want, SBX_MAC_LEN);
}

static void run_launched_once_with_derived_key(void **state)
{
	(void)state;
	struct sbx_keeper k = fresh();
	uint8_t nonce[SBX_NONCE_LEN] = {1};
	uint8_t b[512];
	size_t n = run_req(b, sizeof b, nonce, "/bin/true");
	int64_t err;
	launched = 0;
	assert_int_equal(ask(&k, b, n, &err, NULL), 0);
	assert_int_equal(launched, 1);
	uint8_t want[SBX_MAC_LEN];
	sbx_trust_run_key(secret, nonce, want);
	assert_memory_equal(launched_key, want, SBX_MAC_LEN);
	/* The same request again (a relay replaying it): refused, nothing launched. */
	assert_int_equal(ask(&k, b, n, &err, NULL), SBX_ETRANSFER);
	assert_int_equal(err, EALREADY);
	assert_int_equal(launched, 1);
}

static void changed_run_refused(void **state)
{
	(void)state;
	struct sbx_keeper k = fresh();
	uint8_t nonce[SBX_NONCE_LEN] = {2};
	uint8_t b[512];
	size_t n = run_req(b, sizeof b, nonce, "/bin/true");
	int64_t err;
	launched = 0;
	/* Every byte before the MAC is covered: flip each one in turn. */
	for (size_t i = 0; i < n - 6 - SBX_MAC_LEN; i++) {
		b[i] ^= 0x20;
		int64_t st = ask(&k, b, n, &err, NULL);
		b[i] ^= 0x20;
		assert_int_not_equal(st, 0);
	}
	assert_int_equal(launched, 0);
	/* A field after the MAC is not covered by it: refused too. */
	struct sbx_msgw w;
	sbx_msgw_init(&w, b, sizeof b);
	w.len = n;
	sbx_msgw_str(&w, SBX_T_USER, "0");
	assert_int_equal(ask(&k, b, w.len, &err, NULL), SBX_ETRANSFER);
	assert_int_equal(err, EPERM);
	/* A request signed under another secret. */
	struct sbx_keeper k2;
	memset(&k2, 0, sizeof k2);
	uint8_t other[SBX_SECRET_LEN] = {42};
	uint8_t s2[128];
	ask(&k2, s2, setup_req(s2, sizeof s2, other), &err, NULL);
	n = run_req(b, sizeof b, nonce, "/bin/true");
	assert_int_equal(ask(&k2, b, n, &err, NULL), SBX_ETRANSFER);
	assert_int_equal(launched, 0);
}

/* The bound, as documented: the keeper remembers the last SBX_KEEPER_NONCES run nonces. */
static void nonces_remembered_up_to_the_bound(void **state)
{
	(void)state;
	struct sbx_keeper k = fresh();
	uint8_t b[512];
	int64_t err;
	launched = 0;
	for (int i = 0; i < SBX_KEEPER_NONCES; i++) {
		uint8_t nonce[SBX_NONCE_LEN] = {(uint8_t)i, (uint8_t)(i >> 8), 0x77};
		assert_int_equal(ask(&k, b, run_req(b, sizeof b, nonce, "x"), &err, NULL), 0);
	}
	uint8_t first[SBX_NONCE_LEN] = {0, 0, 0x77};
	assert_int_equal(ask(&k, b, run_req(b, sizeof b, first, "x"), &err, NULL), SBX_ETRANSFER);
	assert_int_equal(launched, SBX_KEEPER_NONCES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(setup_only_once),
	        cmocka_unit_test(auth_answers_the_nonce),
	        cmocka_unit_test(run_launched_once_with_derived_key),
	        cmocka_unit_test(changed_run_refused),
	        cmocka_unit_test(nonces_remembered_up_to_the_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
