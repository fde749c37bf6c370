/* SPDX-License-Identifier: ISC */
/*
 * egress-sandbox: run a plugin worker with one connection to egressd as
 * its only way out, unable to reach any other process. It asks the
 * broker's control socket for an attached connection (`attach INSTANCE`;
 * the reply carries one end of a socketpair by SCM_RIGHTS) or, with
 * --socket, connects to the instance socket itself; places that
 * connection at fd N (default 3, the only fd whose CLOEXEC is cleared)
 * and closes every other inherited fd above 2. Run by root it needs
 * --user and refuses uid 0 and gid 0; it then moves into a private PID
 * and mount namespace with a fresh /proc, where a small init (PID 1)
 * starts the worker, so the worker sees no process outside the sandbox.
 * The worker drops every capability (bounding, ambient, inheritable,
 * permitted, effective) and its groups, switches to the user, sets
 * no_new_privs, enters a Landlock domain of its own (which refuses
 * ptrace access, and so /proc/PID/mem, to every process outside it, and
 * on ABI 6 signals too), installs the seccomp allow-list below, and
 * execs COMMAND with EGRESS_FD=N. Every step is checked; a step that
 * fails stops the launch. Without a PID namespace (an unprivileged
 * caller, or unshare refused) it says so on stderr and goes on only if
 * Landlock still keeps other processes out of reach. A registry
 * of running workers (one locked file per worker under
 * /run/egress-sandbox, or --registry DIR) lets it warn when two
 * instances' workers share a uid. With --net (sandbox_net.c) the command
 * is an unmodified proxy client instead: it gets no connection but a
 * network namespace whose only way out is the broker's proxy on
 * 127.0.0.1:3128, and the filter allows the inet socket calls.
 *
 * The seccomp filter is an allow-list: anything not named in allowed[]
 * (or the argument-checked rules after it) fails with EPERM, so a new
 * kernel's syscall is refused until someone decides otherwise. Only the
 * native ABI is in the filter; a syscall through another one (int 0x80
 * or x32 on x86-64, AArch32 on arm64) kills the process. clone3 fails
 * with ENOSYS (its flags sit behind a pointer; the C library falls back
 * to clone, whose flags are checked). The same filter is printed as an
 * OCI/Docker seccomp profile by --print-seccomp-profile
 * (docs/seccomp-egress-worker.json is its output).
 *
 * Exit status: 2 usage (or a worker that would run as root), 3 attach
 * failed, 4 sandbox setup failed, 127 exec failed; otherwise the
 * worker's status (128 + N when signal N ended it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/landlock.h>

#include <jansson.h>
#include <seccomp.h>

#include "broker/net/unixsock.h"
#include "broker/sandbox/sandbox.h"

#define SANDBOX_CONTROL_DEFAULT	 "/run/egressd/control.sock"
#define SANDBOX_REGISTRY_DEFAULT "/run/egress-sandbox"
#define SANDBOX_REPLY_MAX	 4096
#define SANDBOX_FD_MAX		 65535
#define SANDBOX_KEY_MAX		 256

/*
 * What a worker (a WebAssembly runtime, a libegress client) may call.
 * Left out on purpose, among others: ptrace, process_vm_readv/writev,
 * process_madvise, kcmp, pidfd_open/pidfd_getfd/pidfd_send_signal,
 * get_robust_list, move_pages, migrate_pages (other processes' memory);
 * perf_event_open, bpf, userfaultfd, io_uring_*, vmsplice, keyctl,
 * add_key, request_key (the uid's keyrings), SysV IPC and mq_*;
 * socket, socketpair, connect, bind, listen, accept, accept4, sendmsg,
 * sendmmsg (seccomp cannot see msg_name or SCM_RIGHTS behind the
 * pointer); unshare, setns, mount and the new mount API, chroot,
 * pivot_root; setuid and friends; modify_ldt, iopl, ioperm;
 * name_to_handle_at, open_by_handle_at; mknod; the module, kexec,
 * reboot, swap, quota, clock-setting and syslog calls.
 */
static const char *const allowed[] = {
	/* descriptors and files */
	"read",
	"write",
	"readv",
	"writev",
	"pread64",
	"pwrite64",
	"preadv",
	"pwritev",
	"preadv2",
	"pwritev2",
	"lseek",
	"close",
	"close_range",
	"dup",
	"dup2",
	"dup3",
	"fcntl",
	"flock",
	"fsync",
	"fdatasync",
	"sync_file_range",
	"ftruncate",
	"truncate",
	"fallocate",
	"fadvise64",
	"readahead",
	"copy_file_range",
	"sendfile",
	"splice",
	"tee",
	"open",
	"openat",
	"openat2",
	"creat",
	"stat",
	"fstat",
	"lstat",
	"newfstatat",
	"statx",
	"statfs",
	"fstatfs",
	"access",
	"faccessat",
	"faccessat2",
	"readlink",
	"readlinkat",
	"getdents",
	"getdents64",
	"getcwd",
	"chdir",
	"fchdir",
	"mkdir",
	"mkdirat",
	"rmdir",
	"unlink",
	"unlinkat",
	"rename",
	"renameat",
	"renameat2",
	"link",
	"linkat",
	"symlink",
	"symlinkat",
	"chmod",
	"fchmod",
	"fchmodat",
	"fchmodat2",
	"chown",
	"fchown",
	"lchown",
	"fchownat",
	"utime",
	"utimes",
	"utimensat",
	"futimesat",
	"umask",
	"getxattr",
	"lgetxattr",
	"fgetxattr",
	"listxattr",
	"llistxattr",
	"flistxattr",
	"pipe",
	"pipe2",
	"memfd_create",
	"inotify_init",
	"inotify_init1",
	"inotify_add_watch",
	"inotify_rm_watch",
	/* waiting */
	"poll",
	"ppoll",
	"select",
	"pselect6",
	"epoll_create",
	"epoll_create1",
	"epoll_ctl",
	"epoll_wait",
	"epoll_pwait",
	"epoll_pwait2",
	"eventfd",
	"eventfd2",
	"timerfd_create",
	"timerfd_settime",
	"timerfd_gettime",
	"signalfd",
	"signalfd4",
	/* the inherited connection (sendto: see below) */
	"recvfrom",
	"recvmsg",
	"recvmmsg",
	"shutdown",
	"getsockopt",
	"setsockopt",
	"getsockname",
	"getpeername",
	/* memory */
	"brk",
	"mmap",
	"munmap",
	"mprotect",
	"mremap",
	"madvise",
	"msync",
	"mincore",
	"mlock",
	"mlock2",
	"munlock",
	"membarrier",
	"pkey_alloc",
	"pkey_free",
	"pkey_mprotect",
	"mseal",
	"map_shadow_stack",
	/* threads, processes of its own, signals */
	"fork",
	"vfork",
	"execve",
	"execveat",
	"exit",
	"exit_group",
	"wait4",
	"waitid",
	"kill",
	"tkill",
	"tgkill",
	"rt_sigqueueinfo",
	"rt_tgsigqueueinfo",
	"rt_sigaction",
	"rt_sigprocmask",
	"rt_sigreturn",
	"rt_sigpending",
	"rt_sigtimedwait",
	"rt_sigsuspend",
	"sigaltstack",
	"pause",
	"set_tid_address",
	"set_robust_list",
	"futex",
	"futex_waitv",
	"futex_wake",
	"futex_wait",
	"futex_requeue",
	"rseq",
	"restart_syscall",
	"sched_yield",
	"sched_getaffinity",
	"sched_getparam",
	"sched_getscheduler",
	"sched_get_priority_max",
	"sched_get_priority_min",
	"getcpu",
	"arch_prctl",
	"prctl",
	"getpid",
	"getppid",
	"gettid",
	"getuid",
	"geteuid",
	"getgid",
	"getegid",
	"getresuid",
	"getresgid",
	"getgroups",
	"getpgid",
	"getpgrp",
	"getsid",
	"setsid",
	"setpgid",
	"capget",
	"getpriority",
	"getrlimit",
	"getrusage",
	"uname",
	"sysinfo",
	"times",
	/* time and randomness */
	"clock_gettime",
	"clock_getres",
	"clock_nanosleep",
	"nanosleep",
	"gettimeofday",
	"time",
	"getitimer",
	"setitimer",
	"alarm",
	"timer_create",
	"timer_settime",
	"timer_gettime",
	"timer_getoverrun",
	"timer_delete",
	"getrandom",
	/* confining itself further */
	"seccomp",
	"landlock_create_ruleset",
	"landlock_add_rule",
	"landlock_restrict_self",
};

/* sendto is allowed when argument 4 (dest_addr) is NULL: send(). */
#define SANDBOX_SENDTO_ADDR_ARG 4
/*
 * clone is allowed without namespace flags (a user namespace would give
 * the worker every capability inside it). Argument 0 on x86-64 and
 * arm64. CLONE_NEWTIME is 0x80, inside clone's exit-signal byte: only
 * clone3 and unshare take it, and both are refused.
 */
#define SANDBOX_CLONE_NS \
	(CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | \
	    CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)
/* personality: only the query (0xffffffff) and PER_LINUX (0). */
#define SANDBOX_PERSONA_QUERY 0xffffffffUL
/*
 * ioctl: every request but TIOCSTI (push input into a terminal the
 * worker shares with its caller) and TIOCLINUX. The kernel reads the
 * request as 32 bits, so the rules compare the low 32 bits only, as
 * masked ranges.
 */
static const unsigned long ioctl_refused[] = { TIOCSTI, TIOCLINUX };

/* Landlock constants newer than some uapi headers. */
struct sandbox_ll_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};
#define SANDBOX_LL_NET_BIND_TCP	       (1ULL << 0)
#define SANDBOX_LL_NET_CONNECT_TCP     (1ULL << 1)
#define SANDBOX_LL_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define SANDBOX_LL_SCOPE_SIGNAL	       (1ULL << 1)

/* One masked-equal rule on an argument: (arg & mask) == value. */
struct sandbox_masked {
	uint64_t mask;
	uint64_t value;
};

static volatile sig_atomic_t forward_pid = -1;
/* The signals passed on to the worker (supervise()). From before the
 * worker starts until a handler is in place they are blocked, so one sent
 * then waits and is passed on: the init of a PID namespace would drop it
 * (a signal whose action is the default does not reach it). */
static const int forward_sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1,
	SIGUSR2 };
static sigset_t forward_set;
/* --net: the filter adds sandbox_net_rules(); Landlock leaves TCP alone. */
static int net_mode;

static void usage(FILE *f);

/* Is a one of the options that take a value? */
static int
option_is_known(const char *a)
{
	static const char *const opts[] = {
		"--instance",
		"--control",
		"--socket",
		"--fd",
		"--user",
		"--registry",
	};
	size_t i;

	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if (strcmp(a, opts[i]) == 0)
			return 1;
	return 0;
}

/* A usage error that names what is wrong; the usage follows. */
static int
usage_error(const char *what, const char *arg)
{
	(void)fprintf(stderr, "egress-sandbox: %s '%s'\n", what, arg);
	usage(stderr);
	return EXIT_USAGE;
}

static void
usage(FILE *f)
{
	(void)fprintf(f,
	    "usage: egress-sandbox --instance NAME [--control PATH] [--fd N] "
	    "[--user USER[:GROUP]] [--registry DIR] -- COMMAND [ARG...]\n"
	    "       egress-sandbox --socket PATH [--fd N] "
	    "[--user USER[:GROUP]] [--registry DIR] -- COMMAND [ARG...]\n"
	    "       egress-sandbox --instance NAME --net [--inspect] "
	    "[--control PATH] "
	    "[--user USER[:GROUP]] [--registry DIR] -- COMMAND [ARG...]\n"
	    "       egress-sandbox --print-seccomp-profile\n"
	    "       egress-sandbox --help | --version\n");
}

void
sandbox_die(int code, const char *what, const char *detail)
{
	(void)fprintf(stderr, "egress-sandbox: %s%s%s\n", what,
	    detail != NULL ? ": " : "", detail != NULL ? detail : "");
	exit(code);
}

/*
 * As sandbox_die(), from a child after fork: no stdio buffers are flushed
 * twice.
 */
static void
die_child(int code, const char *what, const char *detail)
{
	(void)fprintf(stderr, "egress-sandbox: %s%s%s\n", what,
	    detail != NULL ? ": " : "", detail != NULL ? detail : "");
	_exit(code);
}

/* Send req with fds[0..nfds) by SCM_RIGHTS on cfd; exit on failure. */
static void
control_send(int cfd, const char *req, const int *fds, size_t nfds)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	struct iovec iov = { (void *)req, strlen(req) };
	struct msghdr mh;
	struct cmsghdr *h;

	if (nfds > 4)
		sandbox_die(EXIT_ATTACH, "too many descriptors to send", NULL);
	memset(&mh, 0, sizeof(mh));
	memset(&cm, 0, sizeof(cm));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nfds > 0) {
		mh.msg_control = cm.b;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		h = CMSG_FIRSTHDR(&mh);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(h), fds, nfds * sizeof(int));
	}
	if (sendmsg(cfd, &mh, MSG_NOSIGNAL) != (ssize_t)strlen(req))
		sandbox_die(EXIT_ATTACH, "control socket write",
		    strerror(errno));
}

/*
 * Read one reply line (at most SANDBOX_REPLY_MAX bytes) from cfd into
 * line, NUL-terminated without its LF; the first descriptor that came
 * with it to *ret_got (-1: none; any other is closed). Exit on failure.
 */
static void
control_read(int cfd, char *line, int *ret_got)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	size_t have = 0, nfds, i;
	int got = -1, fds[4];
	ssize_t n;

	// cppcheck-suppress legacyUninitvar ; read only once have > 0
	while (have == 0 || line[have - 1] != '\n') {
		struct iovec iov = { line + have, SANDBOX_REPLY_MAX - have };
		struct msghdr mh;
		struct cmsghdr *h;

		if (have == SANDBOX_REPLY_MAX)
			sandbox_die(EXIT_ATTACH, "control reply too long",
			    NULL);
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		n = recvmsg(cfd, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			sandbox_die(EXIT_ATTACH, "control socket closed",
			    n < 0 ? strerror(errno) : "no reply");
		for (h = CMSG_FIRSTHDR(&mh); h != NULL;
		     h = CMSG_NXTHDR(&mh, h)) {
			if (h->cmsg_level != SOL_SOCKET ||
			    h->cmsg_type != SCM_RIGHTS)
				continue;
			nfds = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			if (nfds > 4)
				nfds = 4;
			memcpy(fds, CMSG_DATA(h), nfds * sizeof(int));
			for (i = 0; i < nfds; i++) {
				if (got < 0)
					got = fds[i];
				else
					(void)close(fds[i]);
			}
		}
		if (mh.msg_flags & MSG_CTRUNC)
			sandbox_die(EXIT_ATTACH,
			    "control reply: descriptors truncated", NULL);
		have += (size_t)n;
	}
	line[have - 1] = '\0';
	*ret_got = got;
}

int
sandbox_control(const char *path, const char *req, const int *fds, size_t nfds,
    const char *ok_key, int *ret_fd, char **ret_ca)
{
	char line[SANDBOX_REPLY_MAX + 1];
	int cfd, got;
	json_t *doc;

	if ((cfd = unixsock_connect(path)) < 0)
		sandbox_die(EXIT_ATTACH, path, strerror(errno));
	control_send(cfd, req, fds, nfds);
	control_read(cfd, line, &got);
	doc = json_loads(line, 0, NULL);
	if (doc == NULL || json_object_get(doc, ok_key) == NULL) {
		json_t *e = doc != NULL ? json_object_get(doc, "error") : NULL;
		char msg[256];

		(void)snprintf(msg, sizeof(msg), "%.200s",
		    json_is_string(e) ? json_string_value(e) : line);
		json_decref(doc);
		sandbox_die(EXIT_ATTACH, "attach refused", msg);
	}
	if (ret_ca != NULL) {
		json_t *ca = json_object_get(doc, "inspect_ca");

		*ret_ca = json_is_string(ca) ? strdup(json_string_value(ca)) :
					       NULL;
	}
	json_decref(doc);
	if (ret_fd != NULL)
		*ret_fd = got;
	else if (got >= 0)
		(void)close(got);
	return cfd;
}

/*
 * Ask the control socket at path for a connection attached to instance.
 * Return the received fd (CLOEXEC) or exit with EXIT_ATTACH.
 */
static int
attach(const char *path, const char *instance)
{
	char req[128];
	int got = -1;

	if (snprintf(req, sizeof(req), "attach %s\n", instance) >=
	    (int)sizeof(req))
		sandbox_die(EXIT_USAGE, "instance name too long", NULL);
	(void)close(sandbox_control(path, req, NULL, 0, "attached", &got,
	    NULL));
	if (got < 0)
		sandbox_die(EXIT_ATTACH, "attach reply carried no descriptor",
		    NULL);
	return got;
}

/* Put fd at target without CLOEXEC; close everything else above 2. */
static void
place_fd(int fd, int target)
{
	int fl;

	if (fd != target) {
		if (dup3(fd, target, 0) != target)
			sandbox_die(EXIT_SANDBOX, "dup3", strerror(errno));
		(void)close(fd);
	} else if ((fl = fcntl(fd, F_GETFD)) < 0 ||
	    fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) != 0)
		sandbox_die(EXIT_SANDBOX, "fcntl", strerror(errno));
	if (target > 3 && close_range(3, (unsigned)target - 1, 0) != 0)
		sandbox_die(EXIT_SANDBOX, "close_range", strerror(errno));
	if (close_range((unsigned)target + 1, ~0U, 0) != 0)
		sandbox_die(EXIT_SANDBOX, "close_range", strerror(errno));
}

/*
 * Cover the 32-bit values [lo, hi] with aligned power-of-two blocks, each
 * a masked-equal test on the low 32 bits. Return how many were written
 * to out (at most cap).
 */
static size_t
cover_range(uint64_t lo, uint64_t hi, struct sandbox_masked *out, size_t cap)
{
	size_t n = 0;
	uint64_t size;

	while (lo <= hi && n < cap) {
		size = 1;
		while ((lo & (size * 2 - 1)) == 0 && lo + size * 2 - 1 <= hi &&
		    size * 2 <= 0x80000000ULL)
			size *= 2;
		out[n].mask = 0xffffffffULL & ~(size - 1);
		out[n].value = lo;
		n++;
		lo += size;
	}
	return n;
}

/* The masked rules that allow every ioctl request but ioctl_refused[]. */
static size_t
ioctl_rules(struct sandbox_masked *out, size_t cap)
{
	uint64_t lo = 0;
	size_t i, n = 0;

	/* ioctl_refused[] is sorted. */
	for (i = 0; i < sizeof(ioctl_refused) / sizeof(ioctl_refused[0]);
	     i++) {
		if (ioctl_refused[i] > lo)
			n += cover_range(lo, ioctl_refused[i] - 1, out + n,
			    cap - n);
		lo = ioctl_refused[i] + 1;
	}
	n += cover_range(lo, 0xffffffffULL, out + n, cap - n);
	return n;
}

#define SANDBOX_IOCTL_RULES_MAX 96

static int
install_filter(void)
{
	struct sandbox_masked io[SANDBOX_IOCTL_RULES_MAX];
	scmp_filter_ctx ctx;
	size_t i, nio;
	int nr, rv = -1;

	if ((ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM))) == NULL)
		return -1;
	/* no_new_privs is set by the caller; keep libseccomp's default. */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
		SCMP_ACT_KILL_PROCESS) < 0)
		goto out;
	for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		nr = seccomp_syscall_resolve_name(allowed[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not a syscall of this kernel ABI */
		if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) < 0)
			goto out;
	}
	/*
	 * Every comparison names both data words; the second is unused by
	 * EQ and NE, and is given so that every field is initialised.
	 */
	if (net_mode ? sandbox_net_rules(ctx) != 0 :
		       seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendto),
			   1, SCMP_A4(SCMP_CMP_EQ, 0, 0)) < 0)
		goto out;
	if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
		SCMP_A0(SCMP_CMP_MASKED_EQ, SANDBOX_CLONE_NS, 0)) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3),
		0) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
		SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, 0)) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
		SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL,
		    SANDBOX_PERSONA_QUERY)) < 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1,
		SCMP_A0(SCMP_CMP_EQ, 0, 0)) < 0)
		goto out;
	nio = ioctl_rules(io, SANDBOX_IOCTL_RULES_MAX);
	for (i = 0; i < nio; i++)
		if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
			SCMP_A1(SCMP_CMP_MASKED_EQ, io[i].mask, io[i].value)) <
		    0)
			goto out;
	if (seccomp_load(ctx) < 0)
		goto out;
	rv = 0;
out:
	seccomp_release(ctx);
	return rv;
}

/* One argument-checked OCI rule: ALLOW name when (arg & mask) == value. */
static json_t *
profile_masked(const char *name, int arg, uint64_t mask, uint64_t value,
    const char *comment)
{
	return json_pack("{s:[s], s:s, s:[{s:i, s:I, s:I, s:s}], s:s}",
	    "names", name, "action", "SCMP_ACT_ALLOW", "args", "index", arg,
	    "value", (json_int_t)mask, "valueTwo", (json_int_t)value, "op",
	    "SCMP_CMP_MASKED_EQ", "comment", comment);
}

/* Print the filter as an OCI/Docker seccomp profile. */
static int
print_profile(void)
{
	struct sandbox_masked io[SANDBOX_IOCTL_RULES_MAX];
	json_t *names, *prof, *rules;
	size_t i, nio;
	char *s;

	names = json_array();
	for (i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		(void)json_array_append_new(names, json_string(allowed[i]));
	rules = json_array();
	(void)json_array_append_new(rules,
	    json_pack("{s:o, s:s, s:s}", "names", names, "action",
		"SCMP_ACT_ALLOW", "comment",
		"egress worker: the syscalls a worker needs (egress-sandbox)"));
	(void)json_array_append_new(rules,
	    json_pack("{s:[s], s:s, s:[{s:i, s:i, s:s}], s:s}", "names",
		"sendto", "action", "SCMP_ACT_ALLOW", "args", "index",
		SANDBOX_SENDTO_ADDR_ARG, "value", 0, "op", "SCMP_CMP_EQ",
		"comment", "send(): sendto without a destination address"));
	(void)json_array_append_new(rules,
	    profile_masked("clone", 0, SANDBOX_CLONE_NS, 0,
		"clone without namespace flags"));
	(void)json_array_append_new(rules,
	    json_pack("{s:[s], s:s, s:i, s:s}", "names", "clone3", "action",
		"SCMP_ACT_ERRNO", "errnoRet", ENOSYS, "comment",
		"flags behind a pointer: ENOSYS, the C library falls back to "
		"clone"));
	(void)json_array_append_new(rules,
	    profile_masked("personality", 0, 0xffffffffUL, 0,
		"personality(PER_LINUX)"));
	(void)json_array_append_new(rules,
	    profile_masked("personality", 0, 0xffffffffUL,
		SANDBOX_PERSONA_QUERY, "personality query"));
	(void)json_array_append_new(rules,
	    json_pack("{s:[s], s:s, s:[{s:i, s:i, s:s}], s:s}", "names",
		"prlimit64", "action", "SCMP_ACT_ALLOW", "args", "index", 0,
		"value", 0, "op", "SCMP_CMP_EQ", "comment",
		"its own limits only (pid 0)"));
	nio = ioctl_rules(io, SANDBOX_IOCTL_RULES_MAX);
	for (i = 0; i < nio; i++)
		(void)json_array_append_new(rules,
		    profile_masked("ioctl", 1, io[i].mask, io[i].value,
			"every request but TIOCSTI and TIOCLINUX"));
	prof = json_pack("{s:s, s:i, s:[s,s], s:o}", "defaultAction",
	    "SCMP_ACT_ERRNO", "defaultErrnoRet", EPERM, "architectures",
	    "SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64", "syscalls", rules);
	if (prof == NULL ||
	    (s = json_dumps(prof, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) ==
		NULL)
		return 1;
	(void)printf("%s\n", s);
	free(s);
	json_decref(prof);
	return 0;
}

static int
parse_fd(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s < '0' || *s > '9' || *end != '\0' || errno != 0 || v < 3 ||
	    v > SANDBOX_FD_MAX)
		sandbox_die(EXIT_USAGE, "--fd needs a number from 3 to 65535",
		    s);
	return (int)v;
}

/* A decimal id, or -1. */
static long
parse_id(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s < '0' || *s > '9' || *end != '\0' || errno != 0 ||
	    v >= (long)UINT32_MAX)
		return -1;
	return v;
}

/*
 * Resolve USER[:GROUP] (names or numbers) into *ret_uid and *ret_gid.
 * Without GROUP, the user's primary group from the password database.
 */
static void
parse_user(const char *spec, uid_t *ret_uid, gid_t *ret_gid)
{
	char user[256];
	const char *colon = strchr(spec, ':');
	struct passwd *pw;
	struct group *gr;
	long id;
	uid_t uid;
	gid_t gid;

	if ((colon != NULL ? (size_t)(colon - spec) : strlen(spec)) >=
		sizeof(user) ||
	    spec[0] == ':')
		sandbox_die(EXIT_USAGE, "--user needs USER[:GROUP]", spec);
	(void)snprintf(user, sizeof(user), "%.*s",
	    colon != NULL ? (int)(colon - spec) : (int)strlen(spec), spec);
	if ((id = parse_id(user)) >= 0) {
		uid = (uid_t)id;
		pw = getpwuid(uid);
	} else if ((pw = getpwnam(user)) != NULL)
		uid = pw->pw_uid;
	else
		sandbox_die(EXIT_USAGE, "--user: no such user", user);
	if (colon != NULL) {
		if ((id = parse_id(colon + 1)) >= 0)
			gid = (gid_t)id;
		else if ((gr = getgrnam(colon + 1)) != NULL)
			gid = gr->gr_gid;
		else
			sandbox_die(EXIT_USAGE, "--user: no such group",
			    colon + 1);
	} else if (pw != NULL)
		gid = pw->pw_gid;
	else
		sandbox_die(EXIT_USAGE,
		    "--user: a uid without a password entry needs "
		    ":GROUP",
		    user);
	*ret_uid = uid;
	*ret_gid = gid;
}

/* The kernel's Landlock ABI version, or 0 without Landlock. */
static int
landlock_abi(void)
{
	long v;

	v = syscall(SYS_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);
	return v > 0 ? (int)v : 0;
}

/*
 * Put the calling process into a Landlock domain of its own. Being in
 * one is what matters: a landlocked process cannot ptrace, or open
 * /proc/PID/mem and the like of, any process outside its domain (ABI 1).
 * The rights it handles are ones a worker has no use for: creating
 * device and socket files (ABI 1), TCP bind and connect (ABI 4), and
 * scoped abstract Unix sockets and signals (ABI 6). Return 0 or -1.
 */
static int
landlock_enter(int abi)
{
	struct sandbox_ll_attr a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.handled_access_fs = LANDLOCK_ACCESS_FS_MAKE_CHAR |
	    LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_BLOCK;
	/* --net: the namespace confines TCP; the proxy needs connect. */
	if (abi >= 4 && !net_mode)
		a.handled_access_net = SANDBOX_LL_NET_BIND_TCP |
		    SANDBOX_LL_NET_CONNECT_TCP;
	if (abi >= 6)
		a.scoped = SANDBOX_LL_SCOPE_ABSTRACT_UNIX |
		    SANDBOX_LL_SCOPE_SIGNAL;
	fd = (int)syscall(SYS_landlock_create_ruleset, &a, sizeof(a), 0);
	if (fd < 0)
		return -1;
	if (syscall(SYS_landlock_restrict_self, fd, 0) != 0) {
		(void)close(fd);
		return -1;
	}
	(void)close(fd);
	return 0;
}

/*
 * Drop the whole capability bounding set, so no exec can ever gain a
 * capability. strict: it must go (the caller was root, or holds
 * CAP_SETPCAP in the user namespace --net made); otherwise a set
 * that cannot be dropped (no CAP_SETPCAP) is left, which under
 * no_new_privs no exec can use. Exit on failure.
 */
static void
caps_bound_drop(int strict, int keep)
{
	int cap;

	for (cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0)
			break; /* past the last capability */
		if (cap == keep)
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && strict)
			die_child(EXIT_SANDBOX, "PR_CAPBSET_DROP",
			    strerror(errno));
	}
}

/*
 * Clear the ambient and inheritable sets; leave only keep (or nothing,
 * -1) in the permitted and effective ones.
 */
static void
caps_clear(int keep)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3
	};
	struct __user_cap_data_struct data[2];

	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 &&
	    errno != EINVAL)
		die_child(EXIT_SANDBOX, "PR_CAP_AMBIENT_CLEAR_ALL",
		    strerror(errno));
	memset(data, 0, sizeof(data));
	if (keep >= 0 && keep < 32)
		data[0].effective = data[0].permitted = 1U << keep;
	if (syscall(SYS_capset, &hdr, data) != 0)
		die_child(EXIT_SANDBOX, "capset", strerror(errno));
}

/* Exit unless no capability is left (and, strict, the bounding set). */
static void
caps_check(int strict)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3
	};
	struct __user_cap_data_struct data[2];
	int cap, i;

	memset(data, 0xff, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) != 0)
		die_child(EXIT_SANDBOX, "capget", strerror(errno));
	for (i = 0; i < 2; i++)
		if (data[i].effective != 0 || data[i].permitted != 0 ||
		    data[i].inheritable != 0)
			die_child(EXIT_SANDBOX,
			    "capabilities left after the "
			    "drop",
			    NULL);
	for (cap = 0; cap <= 63; cap++) {
		int r = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);

		if (r < 0)
			break;
		if (r != 0 && strict)
			die_child(EXIT_SANDBOX,
			    "capability bounding set left "
			    "after the drop",
			    NULL);
		r = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0);
		if (r > 0)
			die_child(EXIT_SANDBOX,
			    "ambient capability left after "
			    "the drop",
			    NULL);
	}
}

/* Switch to uid:gid with no supplementary group; exit unless for good. */
static void
become(uid_t uid, gid_t gid)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (setgroups(0, NULL) != 0)
		die_child(EXIT_SANDBOX, "setgroups", strerror(errno));
	if (setresgid(gid, gid, gid) != 0)
		die_child(EXIT_SANDBOX, "setresgid", strerror(errno));
	if (setresuid(uid, uid, uid) != 0)
		die_child(EXIT_SANDBOX, "setresuid", strerror(errno));
	if (getresuid(&ru, &eu, &su) != 0 || ru != uid || eu != uid ||
	    su != uid || getresgid(&rg, &eg, &sg) != 0 || rg != gid ||
	    eg != gid || sg != gid || getgroups(0, NULL) != 0)
		die_child(EXIT_SANDBOX, "the user switch did not hold", NULL);
	if (setresuid(0, 0, 0) == 0)
		die_child(EXIT_SANDBOX, "root could be regained", NULL);
}

/* Block the signals supervise() passes on (forward_sigs). */
static void
forward_block(void)
{
	size_t i;

	(void)sigemptyset(&forward_set);
	for (i = 0; i < sizeof(forward_sigs) / sizeof(forward_sigs[0]); i++)
		(void)sigaddset(&forward_set, forward_sigs[i]);
	if (sigprocmask(SIG_BLOCK, &forward_set, NULL) != 0)
		sandbox_die(EXIT_SANDBOX, "sigprocmask", strerror(errno));
}

static void
forward_signal(int sig)
{
	if (forward_pid > 0)
		(void)kill((pid_t)forward_pid, sig);
}

/*
 * Forward the usual termination and user signals to pid, reap every
 * child until pid exits, and return an exit status for it (128 + N when
 * signal N ended it).
 */
static int
supervise(pid_t pid)
{
	struct sigaction sa;
	size_t i;
	pid_t w;
	int st;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward_signal;
	(void)sigemptyset(&sa.sa_mask);
	forward_pid = pid;
	for (i = 0; i < sizeof(forward_sigs) / sizeof(forward_sigs[0]); i++)
		(void)sigaction(forward_sigs[i], &sa, NULL);
	/* What came while they were blocked is passed on now. */
	(void)sigprocmask(SIG_UNBLOCK, &forward_set, NULL);
	for (;;) {
		w = waitpid(-1, &st, 0);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return EXIT_SANDBOX;
		if (w != pid)
			continue;
		if (WIFEXITED(st))
			return WEXITSTATUS(st);
		if (WIFSIGNALED(st))
			return 128 + WTERMSIG(st);
	}
}

/* Copy s into out with anything but printable ASCII as '?'. */
static void
registry_key_clean(const char *s, char *out, size_t len)
{
	size_t i;

	for (i = 0; s[i] != '\0' && i + 1 < len; i++)
		out[i] = (char)(s[i] >= ' ' && s[i] < 0x7f ? s[i] : '?');
	out[i] = '\0';
}

/*
 * Register this worker (uid, key) in dir: a file UID.PID holding key,
 * locked for as long as the returned fd stays open (the supervisor's
 * lifetime). Warn about every live entry of the same uid with another
 * key; remove entries whose holder is gone. Return the fd, or -1 (the
 * check could not be made; said on stderr).
 */
static int
registry_enter(const char *dir, uid_t uid, const char *key)
{
	char tmp[64], name[64], other[SANDBOX_KEY_MAX], prefix[32];
	struct dirent *de;
	DIR *d = NULL;
	int dfd = -1, fd = -1, ofd;
	ssize_t n;

	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		goto fail;
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		goto fail;
	(void)snprintf(tmp, sizeof(tmp), ".new.%ld", (long)getpid());
	(void)snprintf(name, sizeof(name), "%lu.%ld", (unsigned long)uid,
	    (long)getpid());
	(void)snprintf(prefix, sizeof(prefix), "%lu.", (unsigned long)uid);
	/* Locked before it has its name, so no reader takes it for stale. */
	if ((fd = openat(dfd, tmp,
		 O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600)) <
	    0)
		goto fail;
	if (flock(fd, LOCK_EX) != 0 ||
	    write(fd, key, strlen(key)) != (ssize_t)strlen(key) ||
	    renameat(dfd, tmp, dfd, name) != 0)
		goto fail;
	if ((ofd = dup(dfd)) < 0 || (d = fdopendir(ofd)) == NULL)
		goto fail;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
		    strcmp(de->d_name, name) == 0)
			continue;
		ofd = openat(dfd, de->d_name,
		    O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (ofd < 0)
			continue;
		if (flock(ofd, LOCK_SH | LOCK_NB) == 0) {
			/* Its holder is gone. */
			(void)unlinkat(dfd, de->d_name, 0);
			(void)close(ofd);
			continue;
		}
		n = read(ofd, other, sizeof(other) - 1);
		(void)close(ofd);
		if (n < 0)
			continue;
		other[n] = '\0';
		if (strcmp(other, key) != 0) {
			char shown[SANDBOX_KEY_MAX];

			registry_key_clean(other, shown, sizeof(shown));
			(void)fprintf(stderr,
			    "egress-sandbox: warning: uid "
			    "%lu also runs a worker of %s (launcher pid %s); "
			    "give each instance a uid of its own "
			    "(docs/deployment.md)\n",
			    (unsigned long)uid, shown,
			    strchr(de->d_name, '.') + 1);
		}
	}
	(void)closedir(d);
	(void)close(dfd);
	return fd;
fail:
	(void)fprintf(stderr,
	    "egress-sandbox: cannot check whether another "
	    "instance's worker shares uid %lu: %s: %s\n",
	    (unsigned long)uid, dir, strerror(errno));
	if (d != NULL)
		(void)closedir(d);
	if (fd >= 0)
		(void)close(fd);
	if (dfd >= 0) {
		(void)unlinkat(dfd, tmp, 0);
		(void)close(dfd);
	}
	return -1;
}

/* Remove this launcher's registry entry and unlock it. */
static void
registry_leave(const char *dir, uid_t uid, int fd)
{
	char path[PATH_MAX];

	if (fd < 0)
		return;
	if (snprintf(path, sizeof(path), "%s/%lu.%ld", dir, (unsigned long)uid,
		(long)getpid()) < (int)sizeof(path))
		(void)unlink(path);
	(void)close(fd);
}

/*
 * The worker, in the child: switch user (switch_user), drop every
 * capability (strict: the bounding set must go too, caps_bound_drop()),
 * set no_new_privs, enter Landlock and the seccomp filter, exec argv.
 * Never returns.
 */
static void
run_worker(char **argv, int target, int switch_user, int strict, uid_t uid,
    gid_t gid, int abi)
{
	/* The signals passed on reach the worker whatever the caller's mask
	 * (its other blocked signals stay blocked). */
	if (sigprocmask(SIG_UNBLOCK, &forward_set, NULL) != 0)
		die_child(EXIT_SANDBOX, "sigprocmask", strerror(errno));
	/* target -1 (--net): no descriptor is passed. */
	if (target > 3 && close_range(3, (unsigned)target - 1, 0) != 0)
		die_child(EXIT_SANDBOX, "close_range", strerror(errno));
	if (close_range(target < 0 ? 3U : (unsigned)target + 1, ~0U, 0) != 0)
		die_child(EXIT_SANDBOX, "close_range", strerror(errno));
	caps_bound_drop(strict, -1);
	if (switch_user)
		become(uid, gid);
	caps_clear(-1);
	caps_check(strict);
	/* After the credential change, which clears it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		die_child(EXIT_SANDBOX, "PR_SET_PDEATHSIG", strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		die_child(EXIT_SANDBOX, "PR_SET_NO_NEW_PRIVS",
		    strerror(errno));
	if (abi > 0 && landlock_enter(abi) != 0)
		die_child(EXIT_SANDBOX, "Landlock", strerror(errno));
	if (install_filter() != 0)
		die_child(EXIT_SANDBOX, "seccomp filter", NULL);
	(void)execvp(argv[0], argv);
	(void)fprintf(stderr, "egress-sandbox: %s: %s\n", argv[0],
	    strerror(errno));
	_exit(EXIT_EXEC);
}

/*
 * PID 1 of the worker's PID namespace: mount a /proc of this namespace
 * (in the private mount namespace) so the worker sees only the sandbox,
 * start the worker, forward signals to it and reap. The namespace, and
 * every process left in it, ends when this returns. Never returns.
 */
static void
run_init(char **argv, int target, int switch_user, int strict, uid_t uid,
    gid_t gid, int abi)
{
	pid_t pid;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		die_child(EXIT_SANDBOX, "PR_SET_PDEATHSIG", strerror(errno));
	if (getppid() != 0)
		die_child(EXIT_SANDBOX, "the launcher went away", NULL);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		die_child(EXIT_SANDBOX, "private mount namespace",
		    strerror(errno));
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		NULL) != 0)
		/* Also where a user namespace may not mount one (a /proc
		 * partly covered, as in some containers): the host's would
		 * show its processes and, in /proc/PID/net, its network. */
		die_child(EXIT_SANDBOX,
		    "mount /proc (a user namespace may not where /proc is "
		    "partly covered)",
		    strerror(errno));
	if ((pid = fork()) < 0)
		die_child(EXIT_SANDBOX, "fork", strerror(errno));
	if (pid == 0)
		run_worker(argv, target, switch_user, strict, uid, gid, abi);
	/* Nothing of the launcher's stays open here (its control link). */
	if (close_range(3, ~0U, 0) != 0)
		die_child(EXIT_SANDBOX, "close_range", strerror(errno));
	/* CAP_KILL: the worker has another uid, and signals are forwarded. */
	caps_bound_drop(1, CAP_KILL);
	caps_clear(CAP_KILL);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		die_child(EXIT_SANDBOX, "PR_SET_NO_NEW_PRIVS",
		    strerror(errno));
	_exit(supervise(pid));
}

/* Who the worker runs as (--user, or the caller): never root. Return
 * whether this process is root. */
static int
worker_identity(const char *user, uid_t *ret_uid, gid_t *ret_gid)
{
	int root = getuid() == 0 || geteuid() == 0;
	uid_t uid;
	gid_t gid;

	if (user != NULL)
		parse_user(user, &uid, &gid);
	else if (root)
		sandbox_die(EXIT_USAGE,
		    "refusing to run the worker as root: give "
		    "--user USER[:GROUP]",
		    NULL);
	else {
		uid = getuid();
		gid = getgid();
	}
	if (uid == 0 || gid == 0)
		sandbox_die(EXIT_USAGE,
		    "refusing to run the worker as root (uid 0 or "
		    "gid 0)",
		    user);
	if (!root && (uid != getuid() || gid != getgid()))
		sandbox_die(EXIT_SANDBOX,
		    "--user other than the caller needs root", user);
	*ret_uid = uid;
	*ret_gid = gid;
	return root;
}

/*
 * Start the worker (cmd) and return its pid (the PID namespace's init
 * when there is one). Keep other processes out of its reach: the child
 * starts in new PID and mount namespaces (clone, so this process keeps
 * its own: its later children, such as a sanitizer's, stay here), as
 * root or in the user namespace --net made (userns), whose capabilities
 * this process holds.
 */
static pid_t
spawn_worker(char **cmd, int target, int root, int userns, uid_t uid,
    gid_t gid, int regfd)
{
	int abi = landlock_abi();
	pid_t pid;

	(void)fflush(stdout);
	(void)fflush(stderr);
	pid = -1;
	if (root || userns) {
		pid = (pid_t)syscall(SYS_clone,
		    CLONE_NEWPID | CLONE_NEWNS | SIGCHLD, NULL, NULL, NULL,
		    0L);
		if (pid == 0) {
			if (regfd >= 0)
				(void)close(regfd);
			run_init(cmd, target, root, root || userns, uid, gid,
			    abi);
		}
		if (pid < 0)
			(void)fprintf(stderr,
			    "egress-sandbox: no private PID "
			    "namespace: %s\n",
			    strerror(errno));
	} else
		(void)fprintf(stderr,
		    "egress-sandbox: no private PID "
		    "namespace: the caller is not root\n");
	/*
	 * Yama is not enough: its ptrace scope guards attaching, not the
	 * read access behind /proc/PID/environ (secrets in another same-uid
	 * process's environment) and /proc/PID/fd/N (its pipes, memfds and
	 * deleted files, opened anew through the link).
	 */
	if (pid < 0 && abi == 0)
		sandbox_die(EXIT_SANDBOX,
		    "refusing to start: no PID namespace and no "
		    "Landlock; other processes of the worker's uid would be "
		    "in its reach",
		    NULL);
	if (pid < 0)
		(void)fprintf(stderr,
		    "egress-sandbox: other processes stay "
		    "visible; Landlock refuses access to them\n");
	if (abi == 0)
		(void)fprintf(stderr,
		    "egress-sandbox: no Landlock in this "
		    "kernel\n");
	if (pid < 0) {
		(void)fflush(stderr);
		if ((pid = fork()) < 0)
			sandbox_die(EXIT_SANDBOX, "fork", strerror(errno));
		if (pid == 0) {
			if (regfd >= 0)
				(void)close(regfd);
			run_worker(cmd, target, root, root, uid, gid, abi);
		}
	}
	return pid;
}

int
main(int argc, char **argv)
{
	const char *instance = NULL, *control = SANDBOX_CONTROL_DEFAULT;
	const char *sockpath = NULL, *user = NULL;
	const char *registry = SANDBOX_REGISTRY_DEFAULT;
	char num[16], key[SANDBOX_KEY_MAX], clean[SANDBOX_KEY_MAX];
	int ai, target = 3, fd, root, regfd, rc, fd_given = 0, userns = 0;
	uid_t uid;
	gid_t gid;
	pid_t pid;

	for (ai = 1; ai < argc; ai++) {
		const char *a = argv[ai];

		if (strcmp(a, "--") == 0) {
			ai++;
			break;
		}
		if (strcmp(a, "--print-seccomp-profile") == 0 && argc == 2)
			return print_profile();
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
			(void)printf("egress-sandbox %s\n", EGRESSD_VERSION);
			return 0;
		}
		if (strcmp(a, "--net") == 0 || strcmp(a, "--inspect") == 0) {
			net_mode |= a[2] == 'n' ? 1 : 2;
			continue;
		}
		if (!option_is_known(a))
			return usage_error("unknown option", a);
		if (ai + 1 >= argc)
			return usage_error("missing value for", a);
		if (strcmp(a, "--instance") == 0)
			instance = argv[++ai];
		else if (strcmp(a, "--control") == 0)
			control = argv[++ai];
		else if (strcmp(a, "--socket") == 0)
			sockpath = argv[++ai];
		else if (strcmp(a, "--fd") == 0) {
			target = parse_fd(argv[++ai]);
			fd_given = 1;
		} else if (strcmp(a, "--user") == 0)
			user = argv[++ai];
		else
			registry = argv[++ai];
	}
	if (ai >= argc)
		return usage_error("missing", "-- COMMAND");
	if ((instance == NULL) == (sockpath == NULL))
		return usage_error("give exactly one of",
		    "--instance or --socket");
	if (net_mode == 2)
		return usage_error("--inspect needs", "--net");
	if (net_mode && (sockpath != NULL || fd_given))
		return usage_error("--net takes neither of",
		    "--socket or --fd");

	root = worker_identity(user, &uid, &gid);
	if (net_mode) {
		/* Held open: the broker serves the listeners until it closes. */
		fd = sandbox_net_enter(control, instance, root, net_mode & 2,
		    &userns);
		target = -1;
	} else if (sockpath != NULL) {
		if ((fd = unixsock_connect(sockpath)) < 0)
			sandbox_die(EXIT_ATTACH, sockpath, strerror(errno));
	} else
		fd = attach(control, instance);
	if (!net_mode) {
		place_fd(fd, target);
		(void)snprintf(num, sizeof(num), "%d", target);
		if (setenv("EGRESS_FD", num, 1) != 0)
			sandbox_die(EXIT_SANDBOX, "setenv", strerror(errno));
	}

	(void)snprintf(key, sizeof(key), "%s%s",
	    instance != NULL ? "instance " : "socket ",
	    instance != NULL ? instance : sockpath);
	registry_key_clean(key, clean, sizeof(clean));
	forward_block(); /* from here a signal ends in the worker */
	regfd = registry_enter(registry, uid, clean);

	pid = spawn_worker(argv + ai, target, root, userns, uid, gid, regfd);
	if (!net_mode)
		(void)close(target);
	rc = supervise(pid);
	registry_leave(registry, uid, regfd);
	/* --net: the broker closes the listeners now. */
	(void)close(fd);
	sandbox_net_leave();
	return rc;
}
