/* Message schemas of protocol version 1: operation codes, field tags, channels and limits.
 * docs/protocol.md is the prose version of this file; keep them together. */
#ifndef SBX_PROTO_H
#define SBX_PROTO_H

#include <stdint.h>

#define SBX_PROTO_MIN 1 /* oldest version this build speaks */
#define SBX_PROTO_MAX 1 /* newest */

/* Initial credit window of every DATA channel, each direction, unless HELLO/WELCOME say
 * otherwise. */
#define SBX_WINDOW_DEFAULT (4096u * 1024u)
/* DATA frames carry at most this many bytes, so a control frame waits behind at most one. */
#define SBX_DATA_CHUNK (64u * 1024u)

/* The canary both sides send in the handshake: bytes a tty or a text-mode channel rewrites
 * (CR, LF, NUL, DEL, ESC, ^C, ^D, ^Z, 0xff). A changed canary means the channel mangles bytes. */
#define SBX_CANARY "\r\n\n\r\0\x7f\x1b\x03\x04\x1a\xff\xfe\r"
#define SBX_CANARY_LEN 13

enum sbx_opcode {
	SBX_OP_KIND = 1,
	SBX_OP_STAT = 2,
	SBX_OP_RESOLVE = 3,
	SBX_OP_LANDS_CLEAR = 4,
	SBX_OP_EXEC = 5,
	/* harness supervision (agent/supctl.c) */
	SBX_OP_SUP_RUN = 10,    /* launch a detached supervisor over a run folder */
	SBX_OP_SUP_SIGNAL = 11, /* stop or expire: write the marker the supervisor watches */
	SBX_OP_SUP_STATUS = 12, /* state, liveness, receipt presence */
	SBX_OP_SUP_READ = 13,  /* bytes of output.log / receipt.json / receipt.sig from an offset */
	SBX_OP_SUP_REARM = 14, /* begin_activation */
	SBX_OP_SUP_CLOSE = 15, /* mark the session closing: no later activation */
	/* transfers (agent/xfer.c): a job like EXEC whose stdin/stdout carry a pax stream */
	SBX_OP_UPLOAD = 20,   /* stdin: an archive, unpacked into a staging folder, then COMMIT */
	SBX_OP_DOWNLOAD = 21, /* stdout: the archive of a folder or a file */
	SBX_OP_COMMIT = 22,   /* the host's SHA-256 of an upload's stream: commit or abort */

	SBX_OP_DIRECT = 23, /* listen on a private unix socket; the session moves there */

	/* trust (agent/keeper.h, shared/trust.h) */
	SBX_OP_AUTH = 24,  /* prove the sandbox's keeper holds the secret: MAC of a nonce */
	SBX_OP_SETUP = 25, /* give the sandbox its secret, once (KEEP 1: to a keeper for good) */

	/* terminal sessions held in the sandbox (agent/ptyhold.c, agent/ptyctl.c, docs/pty.md) */
	SBX_OP_PTY_SPAWN = 30,  /* start a program on a new pty (or pipes) under a holder */
	SBX_OP_PTY_ATTACH = 31, /* claim a session (takeover), the replay's start and loss */
	SBX_OP_PTY_STREAM = 32, /* a job: the claimed session's output and input, live */
	SBX_OP_PTY_RESIZE = 33,
	SBX_OP_PTY_SIGNAL = 34, /* a named signal to the session's process group */
	SBX_OP_PTY_STATUS = 35, /* offsets, holder, exit status */
	SBX_OP_PTY_DETACH = 36, /* give up the claim (the session lives on) */
	SBX_OP_PTY_CLOSE = 37,  /* end the session: every process of it killed, the holder gone */
	SBX_OP_PTY_LIST = 38,
};

/* Capability bits in HELLO. */
enum sbx_cap {
	SBX_CAP_OPENAT2 = 1 << 0,
	SBX_CAP_PIDFD = 1 << 1,
	SBX_CAP_SUBREAPER = 1 << 2,
	SBX_CAP_INOTIFY = 1 << 3,
	SBX_CAP_PTY = 1 << 4,
	SBX_CAP_SIGNALFD = 1 << 5,
	SBX_CAP_TIMERFD = 1 << 6,
};

/* DATA channels. */
enum sbx_chan {
	SBX_CH_STDIN = 0,
	SBX_CH_STDOUT = 1,
	SBX_CH_STDERR = 2,
	SBX_CH_COUNT = 3,
};

/* Field tags. Tags 1-9 are common to every message that uses them. */
enum sbx_tag {
	/* common */
	SBX_T_STATUS = 1,  /* RESPONSE: 0 ok, else an enum sbx_err_class */
	SBX_T_ERRNO = 2,   /* errno behind a failure */
	SBX_T_MESSAGE = 3, /* human-readable text: error or warning */
	SBX_T_OP = 4,      /* REQUEST: enum sbx_opcode */

	/* HELLO / WELCOME */
	SBX_T_PROTO_MIN = 10,
	SBX_T_PROTO_MAX = 11,
	SBX_T_VERSION = 12, /* WELCOME: the version chosen */
	SBX_T_AGENT_VERSION = 13,
	SBX_T_ARCH = 14,
	SBX_T_UID = 15,
	SBX_T_EUID = 16,
	SBX_T_KERNEL = 17,
	SBX_T_CAPS = 18,
	SBX_T_CGROUP = 19, /* 0 none, 1 v1 (or hybrid), 2 v2 */
	SBX_T_SELF_SHA256 = 20,
	SBX_T_CANARY = 21,
	SBX_T_MAX_PAYLOAD = 22,
	SBX_T_WINDOW = 23,
	SBX_T_PID = 24,
	SBX_T_GID = 25,
	SBX_T_EGID = 26,

	/* probes */
	SBX_T_PATH = 30,  /* repeated for STAT, and KEEP_OUT's partner */
	SBX_T_KIND = 31,  /* "dir" / "file" / "absent" */
	SBX_T_ENTRY = 32, /* STAT result: a nested message per path */
	SBX_T_TYPE = 33,  /* "file" "dir" "symlink" "fifo" "socket" "chardev" "blockdev" */
	SBX_T_MODE = 34,
	SBX_T_GID_OF = 35,
	SBX_T_UID_OF = 36,
	SBX_T_SIZE = 37,
	SBX_T_MTIME_NS = 38,
	SBX_T_TARGET = 39, /* symlink target */
	SBX_T_KEEP_OUT = 40,
	SBX_T_CLEAR = 41,    /* LANDS_CLEAR result: 1 clear, 0 diverted into keep_out */
	SBX_T_PHYSICAL = 42, /* the physical path a probe resolved */

	/* exec */
	SBX_T_ARGV = 50, /* repeated */
	SBX_T_SHELL = 51,
	SBX_T_CWD = 52,
	SBX_T_ENV = 53, /* repeated "K=V" */
	SBX_T_ENV_CLEAR = 54,
	SBX_T_USER = 55,
	SBX_T_TIMEOUT_MS = 56,
	SBX_T_STDIN = 57,   /* 1: stdin streams from the host; 0: /dev/null */
	SBX_T_OUTCOME = 58, /* enum sbx_exec_outcome */
	SBX_T_CODE = 59,
	SBX_T_SIGNAL = 60,
	SBX_T_USER_FALLBACK = 61,
	SBX_T_DURATION_NS = 62,
	SBX_T_LINGER_MS = 63,
	SBX_T_NOTE = 64,      /* a remark that is not an error: the user fallback */
	SBX_T_CANCELLED = 65, /* EXEC result: the host cancelled the command */

	/* supervision */
	SBX_T_RUN_DIR = 70, /* run folder */
	SBX_T_GRACE_MS = 71,
	SBX_T_LOG_MAX = 72,
	SBX_T_KEY = 73, /* receipt HMAC key; held only in the supervisor's memory */
	SBX_T_OFFSET = 74,
	SBX_T_LENGTH = 75,
	SBX_T_BYTES = 76,
	SBX_T_NAME = 77, /* SUP_READ: which file; SUP_SIGNAL: "stop" or "expire" */
	SBX_T_STATE = 78,
	SBX_T_ALIVE = 79,
	SBX_T_HAS_RECEIPT = 80,
	SBX_T_ACTIVATION = 81,

	/* transfers */
	SBX_T_XMODE = 90,      /* UPLOAD: enum sbx_xmode */
	SBX_T_READABLE = 91,   /* UPLOAD: make_readable (a+rX on every member) */
	SBX_T_OPEN = 92,       /* UPLOAD: open the target (replace) or parent (merge) to all */
	SBX_T_FORCE_WALK = 93, /* UPLOAD: the O_NOFOLLOW walk even where openat2 works (tests) */
	SBX_T_SHA256 = 94,     /* 32 bytes: the SHA-256 of the archive stream */
	SBX_T_FILES = 95,      /* counts in a transfer result */
	SBX_T_DIRS = 96,
	SBX_T_LINKS = 97,
	SBX_T_JOB = 98,          /* COMMIT: the stream id of the upload */
	SBX_T_NAMES = 99,        /* DOWNLOAD: repeated; only these top-level entries */
	SBX_T_EXCLUDE = 100,     /* DOWNLOAD: repeated GNU tar --exclude patterns */
	SBX_T_SKIP_UNSAFE = 101, /* DOWNLOAD: skip FIFOs, devices and sockets */
	SBX_T_ARCHIVE_BYTES = 102,
	SBX_T_SKIPPED = 103,
	SBX_T_EXCLUDED = 104,
	SBX_T_ONLY = 106, /* UPLOAD: a file's upload; the one member the archive may hold */

	/* the direct socket */
	SBX_T_TOKEN = 110, /* DIRECT: 32 random bytes the connecting side must send first */

	/* trust */
	SBX_T_SECRET = 111, /* SETUP: the sandbox's 32-byte secret */
	SBX_T_NONCE = 112,  /* AUTH: the host's challenge; SUP_RUN: the run's nonce (16 bytes) */
	SBX_T_MAC = 113,    /* AUTH result; SUP_RUN: the host's MAC, the request's last field */
	SBX_T_KEEP = 114,   /* SETUP: 1 the keeper holds it for good, 0 this session only */

	/* terminal sessions (docs/pty.md) */
	SBX_T_PTY_ID = 120, /* the session's id: 16 lowercase hex digits */
	SBX_T_ROWS = 121,
	SBX_T_COLS = 122,
	SBX_T_PIPE = 123,   /* 1: pipe mode (stdout and stderr apart, no terminal) */
	SBX_T_RETAIN = 124, /* bytes of output retained per channel */
	SBX_T_TAKEOVER = 125,
	SBX_T_SINCE = 126,     /* ATTACH: replay stdout (the terminal) from this offset */
	SBX_T_SINCE_ERR = 127, /* ATTACH: replay stderr (pipe mode) from this offset */
	SBX_T_TICKET = 128,    /* ATTACH result, STREAM and DETACH: the claim, 16 bytes */
	SBX_T_START = 129,     /* the offset the replay starts at (stdout) */
	SBX_T_LOST = 130,      /* bytes asked for that had left the window (stdout) */
	SBX_T_START_ERR = 131,
	SBX_T_LOST_ERR = 132,
	SBX_T_HEAD = 133, /* bytes ever written (stdout) */
	SBX_T_HEAD_ERR = 134,
	SBX_T_HELD = 135,    /* a client holds the session */
	SBX_T_EXITED = 136,  /* the program has ended (then OUTCOME, CODE, SIGNAL) */
	SBX_T_EVICTED = 137, /* STREAM result: another client took the session over */
	SBX_T_SESSION = 138, /* LIST result: a nested message per session */
	SBX_T_BASE = 139,    /* the oldest offset still retained (stdout) */
	SBX_T_BASE_ERR = 140,
};

/* The direct socket: the token's size, and the byte the agent sends on the socket once it has taken
 * it (everything after is frames). */
#define SBX_DIRECT_TOKEN_LEN 32
#define SBX_DIRECT_ACK 0x5a
/* The direct socket's folder: this name and 6 of [A-Za-z0-9] in one of SBX_SANDBOX_DIRS. */
#define SBX_DIRECT_PREFIX ".sbx-direct-"

/* Terminal sessions (docs/pty.md): the holders' folder in the first of SBX_SANDBOX_DIRS that
 * takes it, an id's length, the retained window's default and bounds, the most sessions. */
#define SBX_PTY_DIR ".sbx-pty"
#define SBX_PTY_ID_LEN 16
#define SBX_PTY_TICKET_LEN 16
#define SBX_PTY_RETAIN_DEFAULT (1024u * 1024u)
#define SBX_PTY_RETAIN_MIN 4096u
#define SBX_PTY_RETAIN_MAX (64u * 1024u * 1024u)
#define SBX_PTY_MAX 256

/* The folders of a sandbox where sbx writes, in the order they are tried; agent and host hold
 * the same list (the host checks what the agent says against it). One string of absolute
 * paths, so the shell scripts the runners send use it as it is (runner/boot.c,
 * runner/inject.c); C code walks it with sbx_dir_next (shared/paths.h).
 * SBX_SANDBOX_DIRS: tmpfs first; the agent's binary (with "/" after them) and the direct
 * socket's folder go there. SBX_SOCKET_DIRS: the fixed places of the resident agent's and
 * the keeper's sockets (SBX_RESIDENT_DIR, SBX_KEEPER_DIR), which the host finds without
 * asking: the container's own root first (not a volume an operator may share), then the
 * tmpfs mounts a read-only container still has. */
#define SBX_SANDBOX_DIRS "/tmp /dev/shm /var/tmp /run"
#define SBX_SOCKET_DIRS "/ /run /dev/shm /tmp"
#define SBX_RESIDENT_DIR ".sbx-serve"
#define SBX_RESIDENT_SOCK "s"
#define SBX_KEEPER_DIR ".sbx-keeper"
#define SBX_KEEPER_SOCK "k"

/* UPLOAD modes. */
enum sbx_xmode {
	SBX_XMODE_MERGE = 0,   /* into the folder, created when missing (upload_dir, a file's
	                          parent) */
	SBX_XMODE_REPLACE = 1, /* the folder is replaced by the archive's tree (upload_path) */
};

enum sbx_exec_outcome {
	SBX_EXEC_EXITED = 0,
	SBX_EXEC_SIGNALED = 1,
	SBX_EXEC_TIMED_OUT = 2,
	SBX_EXEC_NOT_STARTED = 3,
};

/* ---- TCP forwarding (issue 21, docs/forwarding.md) ----------------------------------------
 * Kept in one block for merging: ops, tags and frame types at the high end of the free
 * ranges. The frames are sent only to a peer that said it knows them (HELLO FWD = 1). */
enum sbx_fwd_proto {
	SBX_OP_FWD_LISTEN = 62,   /* listen on 127.0.0.1:PORT inside for each FWD_PORT */
	SBX_OP_FWD_UNLISTEN = 63, /* close a listener (LISTENER) and reset its connections */
	SBX_T_FWD_PORT = 190,     /* i64 1..65535; a list in FWD_LISTEN */
	SBX_T_READY_FILE = 191,   /* str: created inside once every listener is up */
	SBX_T_MAX_CONN = 192,     /* i64: connections per listener, default SBX_FWD_MAX_CONN */
	SBX_T_ADDR = 193,         /* str: OPEN host -> agent, the address to connect to inside */
	SBX_T_LISTENER = 194,     /* i64: the stream id of the FWD_LISTEN request */
	SBX_T_FWD = 195,          /* HELLO: 1 when the agent speaks OPEN and RESET */
};
#define SBX_FRAME_TYPE_RESET 0x1e     /* both ways: a connection stream is reset (ERRNO, MESSAGE) */
#define SBX_FRAME_TYPE_OPEN 0x1f      /* both ways: a new connection stream */
#define SBX_FWD_WINDOW (256u * 1024u) /* credit per connection and direction */
#define SBX_FWD_MAX_CONN 1024         /* default connections per forward */
#define SBX_FWD_MAX_CONN_LIMIT 65536  /* the largest MAX_CONN accepted */
#define SBX_FWD_MAX_PORTS 64          /* ports per FWD_LISTEN */
#define SBX_FWD_MAX_LISTENERS 16      /* listener ids per session */
#define SBX_FWD_AGENT_ID_BIT 0x80000000u /* set on every stream id the agent opens */
#define SBX_FWD_RESET_MSG_MAX 200        /* bytes of a RESET's MESSAGE */
#define SBX_FWD_ADDR_MAX 255             /* bytes of an OPEN's ADDR */
#define SBX_FWD_CONNECT_MS 10000         /* a connect not done by then is reset (ETIMEDOUT) */
/* ---- end of TCP forwarding ---------------------------------------------------------------- */

/* Picks the version both sides speak: the highest in both ranges. Returns it, or 0 when the
 * ranges do not overlap. */
static inline int sbx_proto_choose(int64_t a_min, int64_t a_max, int64_t b_min, int64_t b_max)
{
	int64_t hi = a_max < b_max ? a_max : b_max;
	int64_t lo = a_min > b_min ? a_min : b_min;
	return hi >= lo && hi > 0 && hi <= 0xffff ? (int)hi : 0;
}

#endif
