/* SPDX-License-Identifier: ISC */
/*
 * sandbox_probe: runs under egress-sandbox (tests/integ/sandbox.sh) and
 * checks what the sandbox promised: EGRESS_FD names a connected socket
 * without CLOEXEC and no other descriptor above 2 is open; no_new_privs
 * is set; send() on it works while sendto() with an address, sendmsg()
 * (so SCM_RIGHTS too), socket(AF_INET), socket(AF_UNIX) and every
 * syscall named on the command line fail with EPERM. Names that are not
 * syscalls of this ABI are skipped. Prints one "ok ..." or "FAIL ..."
 * line per check; exits 0 only when every check passed.
 */
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <seccomp.h>

static int failures;

static void
expect_eperm(const char *what, long rv)
{
	if (rv == -1 && errno == EPERM)
		printf("ok %s: EPERM\n", what);
	else {
		printf("FAIL %s: rv %ld errno %d (%s)\n", what, rv, errno,
		    strerror(errno));
		failures++;
	}
}

static void
check(const char *what, int cond)
{
	printf("%s %s\n", cond ? "ok" : "FAIL", what);
	if (!cond)
		failures++;
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
	int fd, i, nr, others = 0, one = 0;
	char x = 'x';

	check("EGRESS_FD is set", env != NULL);
	if (env == NULL)
		return 1;
	fd = atoi(env);
	check("EGRESS_FD is not CLOEXEC", fcntl(fd, F_GETFD) == 0);
	check("no_new_privs", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1);
	if ((d = opendir("/proc/self/fd")) != NULL) {
		while ((de = readdir(d)) != NULL) {
			int n = atoi(de->d_name);

			if (de->d_name[0] != '.' && n > 2 && n != fd &&
			    n != dirfd(d))
				others++;
		}
		(void)closedir(d);
	}
	check("no other descriptor above 2", others == 0);
	check("send() on EGRESS_FD works", send(fd, &x, 1, MSG_NOSIGNAL) == 1);
	(void)strcpy(sun.sun_path, "/nonexistent/other.sock");
	expect_eperm("sendto(addr)", sendto(fd, &x, 1, 0,
	    (struct sockaddr *)&sun, sizeof(sun)));
	expect_eperm("socket(AF_INET)", socket(AF_INET, SOCK_STREAM, 0));
	expect_eperm("socket(AF_INET6)", socket(AF_INET6, SOCK_DGRAM, 0));
	expect_eperm("socket(AF_UNIX)", socket(AF_UNIX, SOCK_STREAM, 0));
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
	for (i = 1; i < argc; i++) {
		char what[96];

		nr = seccomp_syscall_resolve_name(argv[i]);
		if (nr < 0) {
			printf("skip %s: not a syscall of this ABI\n", argv[i]);
			continue;
		}
		(void)snprintf(what, sizeof(what), "syscall %s", argv[i]);
		/* Arguments that would be harmless if it ran. */
		expect_eperm(what, syscall(nr, -1L, 0L, 0L, 0L, 0L, 0L));
	}
	return failures == 0 ? 0 : 1;
}
