/* SPDX-License-Identifier: ISC */
/*
 * egress-sandbox: run a plugin worker with no socket syscalls at all and
 * one connection to egressd. It asks the broker's control socket for an
 * attached connection (`attach INSTANCE`; the reply carries one end of a
 * socketpair by SCM_RIGHTS) or, with --socket, connects to the instance
 * socket itself; places that connection at fd N (default 3, the only fd
 * whose CLOEXEC is cleared), closes every other inherited fd above 2,
 * exports EGRESS_FD=N, sets no_new_privs, installs a libseccomp filter
 * that refuses the socket syscalls with EPERM, and execs COMMAND. The
 * same filter is printed as an OCI/Docker seccomp profile by
 * --print-seccomp-profile (docs/seccomp-egress-worker.json is its
 * output). Exit status: 2 usage, 3 attach failed, 4 sandbox setup failed,
 * 127 exec failed.
 *
 * The filter. Refused with EPERM: socket, socketpair, connect, bind,
 * listen, accept, accept4; sendto when its address argument is not NULL
 * (send() is sendto with a NULL address and stays allowed); sendmsg and
 * sendmmsg always, because seccomp cannot read msg_name behind the
 * pointer, and refusing them also refuses SCM_RIGHTS (the shim writes
 * with send()); io_uring_setup, io_uring_enter and io_uring_register,
 * because io_uring's socket, connect, accept and sendmsg operations run
 * without passing the syscall filter; pidfd_getfd, which would copy a
 * socket out of another process of the same user; and socketcall, the
 * 32-bit multiplexer (in the OCI profile). Only the native architecture
 * is allowed: a syscall made through another ABI (int 0x80 on x86-64)
 * kills the process (libseccomp's default bad-architecture action).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>
#include <seccomp.h>

#include "broker/net/unixsock.h"

#define SANDBOX_CONTROL_DEFAULT	"/run/egressd/control.sock"
#define SANDBOX_REPLY_MAX	4096
#define SANDBOX_FD_MAX		65535

#define EXIT_USAGE	2
#define EXIT_ATTACH	3
#define EXIT_SANDBOX	4
#define EXIT_EXEC	127

/* The syscalls refused outright, with EPERM. */
static const char *const refused[] = {
	"socket", "socketpair", "connect", "bind", "listen", "accept",
	"accept4", "sendmsg", "sendmmsg", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "pidfd_getfd", "socketcall",
};
/* sendto is refused when argument 4 (dest_addr) is not 0. */
#define SANDBOX_SENDTO_ADDR_ARG	4

static void
usage(FILE *f)
{
	(void)fprintf(f,
	    "usage: egress-sandbox --instance NAME [--control PATH] [--fd N] "
	    "-- COMMAND [ARG...]\n"
	    "       egress-sandbox --socket PATH [--fd N] -- COMMAND "
	    "[ARG...]\n"
	    "       egress-sandbox --print-seccomp-profile\n");
}

static void
die(int code, const char *what, const char *detail)
{
	(void)fprintf(stderr, "egress-sandbox: %s%s%s\n", what,
	    detail != NULL ? ": " : "", detail != NULL ? detail : "");
	exit(code);
}

/*
 * Ask the control socket at path for a connection attached to instance.
 * Return the received fd (CLOEXEC) or exit with EXIT_ATTACH.
 */
static int
attach(const char *path, const char *instance)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	char line[SANDBOX_REPLY_MAX + 1], req[128];
	size_t have = 0, nfds, i;
	int cfd, got = -1, fds[4];
	json_t *doc;
	ssize_t n;

	if (snprintf(req, sizeof(req), "attach %s\n", instance) >=
	    (int)sizeof(req))
		die(EXIT_USAGE, "instance name too long", NULL);
	if ((cfd = unixsock_connect(path)) < 0)
		die(EXIT_ATTACH, path, strerror(errno));
	if (write(cfd, req, strlen(req)) != (ssize_t)strlen(req))
		die(EXIT_ATTACH, "control socket write", strerror(errno));
	while (have == 0 || line[have - 1] != '\n') {
		struct iovec iov = { line + have, SANDBOX_REPLY_MAX - have };
		struct msghdr mh;
		struct cmsghdr *h;

		if (have == SANDBOX_REPLY_MAX)
			die(EXIT_ATTACH, "control reply too long", NULL);
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		n = recvmsg(cfd, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die(EXIT_ATTACH, "control socket closed",
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
			die(EXIT_ATTACH, "control reply: descriptors truncated",
			    NULL);
		have += (size_t)n;
	}
	(void)close(cfd);
	line[have - 1] = '\0';
	doc = json_loads(line, 0, NULL);
	if (doc == NULL || json_object_get(doc, "attached") == NULL) {
		json_t *e = doc != NULL ? json_object_get(doc, "error") : NULL;
		char msg[256];

		(void)snprintf(msg, sizeof(msg), "%.200s", json_is_string(e) ?
		    json_string_value(e) : line);
		json_decref(doc);
		die(EXIT_ATTACH, "attach refused", msg);
	}
	json_decref(doc);
	if (got < 0)
		die(EXIT_ATTACH, "attach reply carried no descriptor", NULL);
	return got;
}

/* Put fd at target without CLOEXEC; close everything else above 2. */
static void
place_fd(int fd, int target)
{
	int fl;

	if (fd != target) {
		if (dup3(fd, target, 0) != target)
			die(EXIT_SANDBOX, "dup3", strerror(errno));
		(void)close(fd);
	} else if ((fl = fcntl(fd, F_GETFD)) < 0 ||
	    fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) != 0)
		die(EXIT_SANDBOX, "fcntl", strerror(errno));
	if (target > 3 && close_range(3, (unsigned)target - 1, 0) != 0)
		die(EXIT_SANDBOX, "close_range", strerror(errno));
	if (close_range((unsigned)target + 1, ~0U, 0) != 0)
		die(EXIT_SANDBOX, "close_range", strerror(errno));
}

static int
install_filter(void)
{
	scmp_filter_ctx ctx;
	size_t i;
	int nr, rv = -1;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL)
		return -1;
	/* no_new_privs is set by the caller; keep libseccomp's default. */
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		nr = seccomp_syscall_resolve_name(refused[i]);
		if (nr == __NR_SCMP_ERROR)
			continue;	/* not a syscall of this kernel ABI */
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0) < 0)
			goto out;
	}
	if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(sendto), 1,
	    SCMP_CMP(SANDBOX_SENDTO_ADDR_ARG, SCMP_CMP_NE, 0)) < 0)
		goto out;
	if (seccomp_load(ctx) < 0)
		goto out;
	rv = 0;
out:
	seccomp_release(ctx);
	return rv;
}

/* Print the filter as an OCI/Docker seccomp profile. */
static int
print_profile(void)
{
	json_t *names, *prof, *archs;
	size_t i;
	char *s;

	names = json_array();
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		(void)json_array_append_new(names, json_string(refused[i]));
	archs = json_pack("[s,s,s,s,s]", "SCMP_ARCH_X86_64", "SCMP_ARCH_X86",
	    "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM");
	prof = json_pack("{s:s, s:i, s:o, s:[{s:o, s:s, s:i, s:s}, "
	    "{s:[s], s:s, s:i, s:[{s:i, s:i, s:s}], s:s}]}",
	    "defaultAction", "SCMP_ACT_ALLOW",
	    "defaultErrnoRet", EPERM,
	    "architectures", archs,
	    "syscalls",
	    "names", names, "action", "SCMP_ACT_ERRNO", "errnoRet", EPERM,
	    "comment", "egress worker: no sockets of its own (egress-sandbox)",
	    "names", "sendto", "action", "SCMP_ACT_ERRNO", "errnoRet", EPERM,
	    "args", "index", SANDBOX_SENDTO_ADDR_ARG, "value", 0, "op",
	    "SCMP_CMP_NE",
	    "comment", "sendto with a destination address; send() stays");
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
		die(EXIT_USAGE, "--fd needs a number from 3 to 65535", s);
	return (int)v;
}

int
main(int argc, char **argv)
{
	const char *instance = NULL, *control = SANDBOX_CONTROL_DEFAULT;
	const char *sockpath = NULL;
	char num[16];
	int ai, target = 3, fd;

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
		if (ai + 1 >= argc) {
			usage(stderr);
			return EXIT_USAGE;
		}
		if (strcmp(a, "--instance") == 0)
			instance = argv[++ai];
		else if (strcmp(a, "--control") == 0)
			control = argv[++ai];
		else if (strcmp(a, "--socket") == 0)
			sockpath = argv[++ai];
		else if (strcmp(a, "--fd") == 0)
			target = parse_fd(argv[++ai]);
		else {
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (ai >= argc || (instance == NULL) == (sockpath == NULL)) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (sockpath != NULL) {
		if ((fd = unixsock_connect(sockpath)) < 0)
			die(EXIT_ATTACH, sockpath, strerror(errno));
	} else
		fd = attach(control, instance);
	place_fd(fd, target);
	(void)snprintf(num, sizeof(num), "%d", target);
	if (setenv("EGRESS_FD", num, 1) != 0)
		die(EXIT_SANDBOX, "setenv", strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		die(EXIT_SANDBOX, "PR_SET_NO_NEW_PRIVS", strerror(errno));
	if (install_filter() != 0)
		die(EXIT_SANDBOX, "seccomp filter", NULL);
	(void)execvp(argv[ai], argv + ai);
	(void)fprintf(stderr, "egress-sandbox: %s: %s\n", argv[ai],
	    strerror(errno));
	return EXIT_EXEC;
}
