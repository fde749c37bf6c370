/* SPDX-License-Identifier: ISC */
/*
 * sandbox_probe: runs under egress-sandbox (tests/integ/sandbox.sh,
 * sandbox_broker.sh) and checks what the sandbox promised. Always:
 * EGRESS_FD names a connected socket without CLOEXEC and no other
 * descriptor above 2 is open; no_new_privs is set and no capability is
 * effective, permitted, inheritable or ambient; send() on EGRESS_FD
 * works while sendto() with an address, sendmsg() (so SCM_RIGHTS too),
 * socket() of any family and connect() fail with EPERM; bpf, userfaultfd,
 * keyctl, add_key, request_key, io_uring_setup, unshare, setns, mount,
 * clone with CLONE_NEWUSER, personality(READ_IMPLIES_EXEC) and
 * personality(ADDR_NO_RANDOMIZE) (also with high bits set) and
 * ioctl(TIOCSTI) (also with high bits set) fail with EPERM, clone3 with
 * ENOSYS; a syscall through the x32 or i386 ABI kills a child with
 * SIGSYS; threads, fork, the personality query and ioctl(FIONREAD) still
 * work. Every syscall named on the command line fails with EPERM (names
 * that are not syscalls of this ABI are skipped).
 *
 * With --attack PID (another process of the same uid): ptrace attach and
 * seize, process_vm_readv, process_vm_writev, kcmp, pidfd_open,
 * pidfd_getfd, perf_event_open on PID, get_robust_list, move_pages,
 * migrate_pages, prlimit64, sched_setaffinity and setpriority on PID
 * fail with EPERM; opening /proc/PID/mem (read-write and read-only),
 * reading /proc/PID/fd/N (N from --victim-fd, default 3) and /proc/PID/
 * environ all fail, each reported with its errno as "errno WHAT: ENAME"
 * for the caller to check which layer refused it; the outcome of
 * kill(PID, 0) is reported as "result kill(PID, 0): ENAME|allowed".
 * Also prints "info pid P", "info procs N" (processes visible in /proc)
 * and "info CapBnd HEX". Prints one "ok ..." or "FAIL ..." line per
 * check; exits 0 only when every check passed.
 */
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include <seccomp.h>

static int failures;

static void
expect_errno(const char *what, long rv, int want)
{
	int e = errno;

	if (rv == -1 && e == want)
		printf("ok %s: %s\n", what, strerrorname_np(want));
	else {
		printf("FAIL %s: rv %ld errno %d (%s), want %s\n", what, rv, e,
		    strerror(e), strerrorname_np(want));
		failures++;
	}
}

static void
expect_eperm(const char *what, long rv)
{
	expect_errno(what, rv, EPERM);
}

/* rv must be a failure; report which errno refused it. */
static void
expect_fail(const char *what, long rv)
{
	int e = errno;

	if (rv == -1) {
		printf("errno %s: %s\n", what, strerrorname_np(e));
		return;
	}
	printf("FAIL %s: succeeded (rv %ld)\n", what, rv);
	failures++;
}

static void
check(const char *what, int cond)
{
	printf("%s %s\n", cond ? "ok" : "FAIL", what);
	if (!cond)
		failures++;
}

static void *
thread_main(void *arg)
{
	return arg;
}

/* Run f in a child; return the signal that ended it, or 0. */
static int
child_signal(void (*f)(void))
{
	pid_t pid;
	int st;

	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		f();
		_exit(0);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

#ifdef __x86_64__
static void
call_x32(void)
{
	(void)syscall(0x40000000L | SYS_getpid);
}

static void
call_int80(void)
{
	long ret;

	/* A kernel without i386 entry answers SIGSEGV: let it end the
	 * process (a sanitizer's handler would turn it into an abort). */
	(void)signal(SIGSEGV, SIG_DFL);
	/* getpid (20) through the i386 entry point. */
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
	(void)ret;
}
#endif

/* The /proc/self/status line "key:\tvalue", value into out. */
static int
status_field(const char *key, char *out, size_t len)
{
	char line[256];
	size_t kl = strlen(key);
	FILE *f;
	int found = -1;

	if ((f = fopen("/proc/self/status", "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
			char *v = line + kl + 1;

			while (*v == '\t' || *v == ' ')
				v++;
			v[strcspn(v, "\n")] = '\0';
			(void)snprintf(out, len, "%s", v);
			found = 0;
			break;
		}
	(void)fclose(f);
	return found;
}

static void
check_caps(void)
{
	static const char *const zero[] = { "CapInh", "CapPrm", "CapEff",
		"CapAmb" };
	char v[64], what[64];
	size_t i;

	for (i = 0; i < sizeof(zero) / sizeof(zero[0]); i++) {
		(void)snprintf(what, sizeof(what), "%s is 0", zero[i]);
		check(what,
		    status_field(zero[i], v, sizeof(v)) == 0 &&
			strspn(v, "0") == strlen(v));
	}
	if (status_field("CapBnd", v, sizeof(v)) == 0)
		printf("info CapBnd %s\n", v);
	check("NoNewPrivs is 1",
	    status_field("NoNewPrivs", v, sizeof(v)) == 0 &&
		strcmp(v, "1") == 0);
}

/* The syscalls no worker may make, whatever the target. */
static void
check_refused(void)
{
	struct clone_args {
		uint64_t flags, pidfd, child_tid, parent_tid, exit_signal;
		uint64_t stack, stack_size, tls;
	} ca;
	long query;
	pthread_t t;
	int n = 0, st, sig;
	pid_t pid;
	char c = 'x';

	expect_eperm("bpf(BPF_PROG_LOAD)", syscall(SYS_bpf, 5, NULL, 0));
	expect_eperm("userfaultfd", syscall(SYS_userfaultfd, 0));
	expect_eperm("keyctl(GET_KEYRING_ID, user keyring)",
	    syscall(SYS_keyctl, 0, -4, 0));
	expect_eperm("add_key",
	    syscall(SYS_add_key, "user", "egress", "x", 1, -3));
	expect_eperm("request_key",
	    syscall(SYS_request_key, "user", "egress", NULL, 0));
	expect_eperm("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL));
	expect_eperm("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER));
	expect_eperm("unshare(CLONE_NEWPID)", unshare(CLONE_NEWPID));
	expect_eperm("setns", setns(0, 0));
	expect_eperm("mount",
	    syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, NULL));
	expect_eperm("clone(CLONE_NEWUSER)",
	    syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, NULL, NULL, 0));
	memset(&ca, 0, sizeof(ca));
	ca.exit_signal = SIGCHLD;
	expect_errno("clone3", syscall(SYS_clone3, &ca, sizeof(ca)), ENOSYS);
	expect_eperm("personality(READ_IMPLIES_EXEC)",
	    syscall(SYS_personality, READ_IMPLIES_EXEC));
	expect_eperm("personality(ADDR_NO_RANDOMIZE)",
	    syscall(SYS_personality, ADDR_NO_RANDOMIZE));
	expect_eperm("personality(1<<32 | READ_IMPLIES_EXEC)",
	    syscall(SYS_personality, (1UL << 32) | READ_IMPLIES_EXEC));
	query = syscall(SYS_personality, 0xffffffffUL);
	check("personality query works",
	    query >= 0 &&
		(query & (READ_IMPLIES_EXEC | ADDR_NO_RANDOMIZE)) == 0);
	expect_eperm("ioctl(TIOCSTI)", syscall(SYS_ioctl, 0, TIOCSTI, &c));
	expect_eperm("ioctl(1<<32 | TIOCSTI)",
	    syscall(SYS_ioctl, 0, (1UL << 32) | TIOCSTI, &c));
	expect_eperm("ioctl(TIOCLINUX)", syscall(SYS_ioctl, 0, TIOCLINUX, &c));
	check("ioctl(FIONREAD) works",
	    ioctl(1, FIONREAD, &n) == 0 || errno != EPERM);
	check("a thread starts (clone after clone3's ENOSYS)",
	    pthread_create(&t, NULL, thread_main, NULL) == 0 &&
		pthread_join(t, NULL) == 0);
	pid = fork();
	if (pid == 0)
		_exit(7);
	check("fork and wait work",
	    pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		WEXITSTATUS(st) == 7);
#ifdef __x86_64__
	check("an x32 syscall kills the process (SIGSYS)",
	    child_signal(call_x32) == SIGSYS);
	/* A kernel built or booted without i386 emulation refuses int
	 * 0x80 itself (SIGSEGV) before the filter sees it; the call does
	 * not run either way. A call that ran exits 0 and fails here. */
	sig = child_signal(call_int80);
	check(sig == SIGSEGV ?
		"an int 0x80 syscall does not run (SIGSEGV: "
		"this kernel has no i386 entry)" :
		"an int 0x80 syscall kills the process (SIGSYS)",
	    sig == SIGSYS || sig == SIGSEGV);
#endif
}

/* Every way at another process of the same uid; none may work. */
static void
attack(pid_t pid, int vfd)
{
	struct perf_event_attr pe;
	struct iovec local, remote;
	char buf[64], path[96], what[128];
	unsigned long nodes = 1;
	cpu_set_t cpus;
	int fd;

	(void)snprintf(what, sizeof(what), "ptrace(PTRACE_ATTACH, %ld)",
	    (long)pid);
	expect_eperm(what,
	    syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, pid, 0, 0));
	expect_eperm("ptrace(PTRACE_SEIZE)",
	    syscall(SYS_ptrace, 0x4206 /* PTRACE_SEIZE */, pid, 0, 0));
	local.iov_base = buf;
	local.iov_len = sizeof(buf);
	remote.iov_base = (void *)0x400000;
	remote.iov_len = sizeof(buf);
	expect_eperm("process_vm_readv",
	    syscall(SYS_process_vm_readv, pid, &local, 1, &remote, 1, 0));
	expect_eperm("process_vm_writev",
	    syscall(SYS_process_vm_writev, pid, &local, 1, &remote, 1, 0));
	expect_eperm("kcmp(KCMP_FILE)",
	    syscall(SYS_kcmp, getpid(), pid, 0 /* KCMP_FILE */, 0, 0));
	expect_eperm("pidfd_open", syscall(SYS_pidfd_open, pid, 0));
	expect_eperm("pidfd_getfd", syscall(SYS_pidfd_getfd, 3, vfd, 0));
	memset(&pe, 0, sizeof(pe));
	pe.size = sizeof(pe);
	pe.type = PERF_TYPE_SOFTWARE;
	pe.config = PERF_COUNT_SW_CPU_CLOCK;
	expect_eperm("perf_event_open(pid)",
	    syscall(SYS_perf_event_open, &pe, pid, -1, -1, 0));
	expect_eperm("get_robust_list(pid)",
	    syscall(SYS_get_robust_list, pid, NULL, NULL));
	expect_eperm("move_pages(pid)",
	    syscall(SYS_move_pages, pid, 0, NULL, NULL, NULL, 0));
	expect_eperm("migrate_pages(pid)",
	    syscall(SYS_migrate_pages, pid, 8, &nodes, &nodes));
	expect_eperm("process_madvise",
	    syscall(SYS_process_madvise, 3, &local, 1, 0, 0));
	expect_eperm("prlimit64(pid)",
	    syscall(SYS_prlimit64, pid, RLIMIT_NOFILE, NULL, NULL));
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	expect_eperm("sched_setaffinity(pid)",
	    syscall(SYS_sched_setaffinity, pid, sizeof(cpus), &cpus));
	expect_eperm("setpriority(pid)",
	    syscall(SYS_setpriority, PRIO_PROCESS, pid, 19));

	(void)snprintf(path, sizeof(path), "/proc/%ld/mem", (long)pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	expect_fail("open /proc/PID/mem O_RDWR", fd);
	if (fd >= 0)
		(void)close(fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	expect_fail("open /proc/PID/mem O_RDONLY", fd);
	if (fd >= 0)
		(void)close(fd);
	(void)snprintf(path, sizeof(path), "/proc/%ld/fd/%d", (long)pid, vfd);
	expect_fail("readlink /proc/PID/fd/N",
	    readlink(path, buf, sizeof(buf)));
	fd = open(path, O_RDWR | O_CLOEXEC);
	expect_fail("open /proc/PID/fd/N", fd);
	if (fd >= 0)
		(void)close(fd);
	(void)snprintf(path, sizeof(path), "/proc/%ld/environ", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	expect_fail("open /proc/PID/environ", fd);
	if (fd >= 0)
		(void)close(fd);
	/* Refused only by a PID namespace or Landlock ABI 6: reported. */
	if (kill(pid, 0) == 0)
		printf("result kill(PID, 0): allowed\n");
	else
		printf("result kill(PID, 0): %s\n", strerrorname_np(errno));
}

int
main(int argc, char **argv)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const char *env = getenv("EGRESS_FD");
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr mh;
	struct cmsghdr *h;
	struct iovec iov;
	struct dirent *de;
	DIR *d;
	int fd, i, nr, others = 0, procs = 0, one = 0, vfd = 3;
	pid_t target = 0;
	char x = 'x';

	for (i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--attack") == 0)
			// NOLINTNEXTLINE(cert-err34-c): numbers from the test script
			target = (pid_t)atol(argv[i + 1]);
		else if (strcmp(argv[i], "--victim-fd") == 0)
			// NOLINTNEXTLINE(cert-err34-c): numbers from the test script
			vfd = atoi(argv[i + 1]);
		else
			break;
	}
	check("EGRESS_FD is set", env != NULL);
	if (env == NULL)
		return 1;
	// NOLINTNEXTLINE(cert-err34-c): set by egress-sandbox; checked next
	fd = atoi(env);
	check("EGRESS_FD is not CLOEXEC", fcntl(fd, F_GETFD) == 0);
	check("no_new_privs", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1);
	if ((d = opendir("/proc/self/fd")) != NULL) {
		while ((de = readdir(d)) != NULL) {
			// NOLINTNEXTLINE(cert-err34-c): /proc/self/fd names are numbers
			int n = atoi(de->d_name);

			if (de->d_name[0] != '.' && n > 2 && n != fd &&
			    n != dirfd(d))
				others++;
		}
		(void)closedir(d);
	}
	check("no other descriptor above 2", others == 0);
	check_caps();
	printf("info pid %ld\n", (long)getpid());
	if ((d = opendir("/proc")) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (isdigit((unsigned char)de->d_name[0]))
				procs++;
		(void)closedir(d);
	}
	printf("info procs %d\n", procs);
	check("send() on EGRESS_FD works", send(fd, &x, 1, MSG_NOSIGNAL) == 1);
	(void)strcpy(sun.sun_path, "/nonexistent/other.sock");
	expect_eperm("sendto(addr)",
	    sendto(fd, &x, 1, 0, (struct sockaddr *)&sun, sizeof(sun)));
	expect_eperm("socket(AF_INET)", socket(AF_INET, SOCK_STREAM, 0));
	expect_eperm("socket(AF_INET6)", socket(AF_INET6, SOCK_DGRAM, 0));
	expect_eperm("socket(AF_UNIX)", socket(AF_UNIX, SOCK_STREAM, 0));
	expect_eperm("socket(AF_NETLINK)", socket(AF_NETLINK, SOCK_RAW, 0));
	expect_eperm("connect(other instance socket)",
	    connect(fd, (struct sockaddr *)&sun, sizeof(sun)));
	/* Passing an fd to the broker: refused at the syscall. */
	memset(&mh, 0, sizeof(mh));
	memset(cbuf, 0, sizeof(cbuf));
	iov.iov_base = &x;
	iov.iov_len = 1;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	h = CMSG_FIRSTHDR(&mh);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &one, sizeof(int));
	expect_eperm("sendmsg(SCM_RIGHTS)", sendmsg(fd, &mh, MSG_NOSIGNAL));
	check_refused();
	if (target > 0)
		attack(target, vfd);
	for (; i < argc; i++) {
		char what[96];

		nr = seccomp_syscall_resolve_name(argv[i]);
		if (nr < 0) {
			printf("skip %s: not a syscall of this ABI\n",
			    argv[i]);
			continue;
		}
		(void)snprintf(what, sizeof(what), "syscall %s", argv[i]);
		/* Arguments that would be harmless if it ran. */
		expect_eperm(what, syscall(nr, -1L, 0L, 0L, 0L, 0L, 0L));
	}
	(void)fflush(stdout);
	return failures == 0 ? 0 : 1;
}
