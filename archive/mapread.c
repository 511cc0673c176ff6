/* Mapped reads (archive/mapread.h): a window of WIN bytes of the file, mapped with its page
 * tables filled at once, hashed and copied out by sbx_sha256_update_copy under a SIGBUS
 * handler that jumps back out when the fault lies in the window. */
#include "mapread.h"

#include <errno.h>
#include <setjmp.h>
#include <string.h>
#include <sys/mman.h>

/* 2 MiB: one mmap and munmap per 2 MiB of data (a mapped window counts in the agent's RSS,
 * which must stay under 8 MiB with the other buffers); a multiple of every page size. */
#define WIN ((size_t)2 << 20)

/* The handler's view: the window being read, armed only during the copy. */
static sigjmp_buf jump;
static volatile sig_atomic_t armed;
static unsigned char *volatile lo, *volatile hi;

static void on_bus(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	unsigned char *a = si->si_addr;
	if (armed && si->si_code > 0 && a >= lo && a < hi) {
		armed = 0;
		siglongjmp(jump, 1);
	}
	/* Not ours: what would have happened without the handler. A fault comes back when
	 * this returns and now takes the default action; a sent signal is sent again. */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	if (si->si_code <= 0)
		raise(sig);
}

int sbx_mapread_begin(struct sbx_mapread *m)
{
	memset(m, 0, sizeof *m);
	m->fd = -1;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_bus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, &m->old) != 0)
		return -1;
	m->on = 1;
	return 0;
}

void sbx_mapread_unmap(struct sbx_mapread *m)
{
	if (m->p != NULL)
		munmap(m->p, m->len);
	m->p = NULL;
	m->fd = -1;
}

int sbx_mapread_copy(struct sbx_mapread *m, int fd, off_t off, size_t n, struct sbx_sha256 *sha,
                     unsigned char *dst)
{
	if (!m->on) {
		errno = EINVAL;
		return -1;
	}
	if (m->p == NULL || m->fd != fd || off < m->at || (size_t)(off - m->at) + n > m->len) {
		sbx_mapread_unmap(m);
		off_t at = off & ~(off_t)(WIN - 1);
		size_t len = WIN;
		if ((size_t)(off - at) + n > len)
			len = ((size_t)(off - at) + n + WIN - 1) & ~(WIN - 1);
		void *p = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, at);
		if (p == MAP_FAILED)
			return -1;
		m->p = p;
		m->fd = fd;
		m->at = at;
		m->len = len;
	}
	lo = m->p;
	hi = m->p + m->len;
	if (sigsetjmp(jump, 1) != 0) {
		/* The file ended inside [off, off + n): it shrank after it was measured. */
		sbx_mapread_unmap(m);
		errno = ENODATA;
		return -1;
	}
	armed = 1;
	sbx_sha256_update_copy(sha, dst, m->p + (off - m->at), n);
	armed = 0;
	return 0;
}

void sbx_mapread_end(struct sbx_mapread *m)
{
	sbx_mapread_unmap(m);
	if (m->on)
		sigaction(SIGBUS, &m->old, NULL);
	m->on = 0;
}
