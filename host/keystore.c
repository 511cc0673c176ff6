/* The host's store of sandbox secrets (sbx.h, "Trust"): one file per sandbox identity (a
 * runner spec such as "ns:t1", "podman:c1", "ssh:h", or "via:" and the command line) in the key
 * folder, readable by its owner only; and the trust a session for such a spec starts with. */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"

int sbx_keydir(char *out, size_t cap, struct sbx_err *e)
{
	const char *kd = getenv("SBX_KEY_DIR"), *home = getenv("HOME");
	int n;
	if (kd != NULL && kd[0] != '\0')
		n = snprintf(out, cap, "%s", kd);
	else if (home != NULL && home[0] != '\0')
		n = snprintf(out, cap, "%s/.cache/sbx/keys", home);
	else
		n = snprintf(out, cap, "/tmp/sbx-keys-%u", (unsigned)getuid());
	if (n < 0 || (size_t)n >= cap)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "key folder");
	/* mkdir -p, private. */
	for (char *p = out + 1; *p != '\0'; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(out, 0700);
			*p = '/';
		}
	}
	if (mkdir(out, 0700) != 0 && errno != EEXIST)
		return sbx_err_set(e, SBX_EUSAGE, errno, "key folder %s", out);
	return 0;
}

static int secret_path(const char *identity, char *out, size_t cap, struct sbx_err *e)
{
	char dir[4096];
	if (sbx_keydir(dir, sizeof dir, e) != 0)
		return -1;
	uint8_t d[SBX_SHA256_LEN];
	char hex[SBX_SHA256_HEX_LEN];
	sbx_sha256(identity, strlen(identity), d);
	sbx_hex(d, 16, hex);
	if ((size_t)snprintf(out, cap, "%s/sandbox-%s.secret", dir, hex) >= cap)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "key path");
	return 0;
}

int sbx_secret_load(const char *identity, uint8_t secret[SBX_SECRET_LEN], struct sbx_err *e)
{
	char path[4200];
	if (secret_path(identity, path, sizeof path, e) != 0)
		return -1;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : sbx_err_set(e, SBX_EUSAGE, errno, "secret %s", path);
	ssize_t n = read(fd, secret, SBX_SECRET_LEN);
	close(fd);
	if (n != SBX_SECRET_LEN)
		return sbx_err_set(e, SBX_EUSAGE, 0, "secret %s is not %d bytes", path,
		                   SBX_SECRET_LEN);
	return 1;
}

int sbx_secret_store(const char *identity, const uint8_t secret[SBX_SECRET_LEN], struct sbx_err *e)
{
	char path[4200], tmp[4300];
	if (secret_path(identity, path, sizeof path, e) != 0)
		return -1;
	snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
	unlink(tmp);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int ok = fd >= 0 && write(fd, secret, SBX_SECRET_LEN) == SBX_SECRET_LEN;
	int err = errno;
	if (fd >= 0 && close(fd) != 0)
		ok = 0;
	if (!ok || rename(tmp, path) != 0) {
		err = ok ? errno : err;
		unlink(tmp);
		return sbx_err_set(e, SBX_EUSAGE, err, "cannot write secret %s", path);
	}
	return 0;
}

int sbx_secret_new(const char *identity, uint8_t secret[SBX_SECRET_LEN], struct sbx_err *e)
{
	if (getrandom(secret, SBX_SECRET_LEN, 0) != SBX_SECRET_LEN)
		return sbx_err_set(e, SBX_EUSAGE, errno, "getrandom");
	return sbx_secret_store(identity, secret, e);
}

int sbx_secret_forget(const char *identity, struct sbx_err *e)
{
	char path[4200];
	if (secret_path(identity, path, sizeof path, e) != 0)
		return -1;
	if (unlink(path) != 0 && errno != ENOENT)
		return sbx_err_set(e, SBX_EUSAGE, errno, "forget secret %s", path);
	return 0;
}

int sbx_session_trust_for(struct sbx_session *s, const char *spec, int boundary, struct sbx_err *e)
{
	uint8_t secret[SBX_SECRET_LEN];
	int rc;
	if (!boundary) {
		rc = getrandom(secret, sizeof secret, 0) == (ssize_t)sizeof secret
		             ? sbx_session_trust(s, secret, SBX_TRUST_SESSION, e)
		             : sbx_err_set(e, SBX_EUSAGE, errno, "getrandom");
	} else {
		int have = sbx_secret_load(spec, secret, e);
		if (have < 0)
			return -1;
		if (have) {
			rc = sbx_session_trust(s, secret, SBX_TRUST_CHECK, e);
		} else if (getrandom(secret, sizeof secret, 0) != (ssize_t)sizeof secret) {
			rc = sbx_err_set(e, SBX_EUSAGE, errno, "getrandom");
		} else {
			/* Kept once the keeper has taken it (host/trust.c). */
			rc = sbx_session_trust(s, secret, SBX_TRUST_KEEPER, e);
			free(s->trust_identity);
			s->trust_identity = rc == 0 ? strdup(spec) : NULL;
			if (rc == 0 && s->trust_identity == NULL)
				rc = sbx_err_set(e, SBX_EUSAGE, ENOMEM, "trust");
		}
	}
	memset(secret, 0, sizeof secret);
	return rc;
}

int sbx_runkey_path(const char *channel, const char *run_dir, char *out, size_t cap,
                    struct sbx_err *e)
{
	char dir[4096];
	if (sbx_keydir(dir, sizeof dir, e) != 0)
		return -1;
	struct sbx_sha256 h;
	sbx_sha256_init(&h);
	sbx_sha256_update(&h, channel, strlen(channel));
	sbx_sha256_update(&h, "\n", 1);
	sbx_sha256_update(&h, run_dir, strlen(run_dir));
	uint8_t d[SBX_SHA256_LEN];
	char hex[SBX_SHA256_HEX_LEN];
	sbx_sha256_final(&h, d);
	sbx_hex(d, 16, hex);
	if ((size_t)snprintf(out, cap, "%s/%s.key", dir, hex) >= cap)
		return sbx_err_set(e, SBX_EUSAGE, ENAMETOOLONG, "key path too long");
	return 0;
}

int sbx_runkey_load(const char *path, uint8_t key[SBX_RUN_KEY_LEN], struct sbx_err *e)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_set(e, SBX_EUSAGE, errno, "key file %s", path);
	ssize_t n = read(fd, key, SBX_RUN_KEY_LEN);
	close(fd);
	if (n != SBX_RUN_KEY_LEN)
		return sbx_err_set(e, SBX_EUSAGE, 0, "key file %s is not %d bytes", path,
		                   SBX_RUN_KEY_LEN);
	return 0;
}

int sbx_runkey_save(const char *path, const uint8_t key[SBX_RUN_KEY_LEN], struct sbx_err *e)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int ok = fd >= 0 && write(fd, key, SBX_RUN_KEY_LEN) == SBX_RUN_KEY_LEN;
	int err = errno;
	if (fd >= 0 && close(fd) != 0 && ok) {
		ok = 0;
		err = errno;
	}
	if (!ok) {
		unlink(path);
		return sbx_err_set(e, SBX_EUSAGE, err, "cannot write key file %s", path);
	}
	return 0;
}
