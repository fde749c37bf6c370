/* SPDX-License-Identifier: ISC */
/*
 * nonetlink: run a program with socket(AF_NETLINK, ...) failing with
 * EAFNOSUPPORT, as systemd's RestrictAddressFamilies= without AF_NETLINK
 * makes it fail. Usage: nonetlink PROGRAM [ARG...]. Exits 111 when the
 * filter cannot be installed, 127 when PROGRAM cannot be run.
 */
#include <sys/socket.h>

#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	scmp_filter_ctx c;

	if (argc < 2) {
		fprintf(stderr, "usage: nonetlink PROGRAM [ARG...]\n");
		return 2;
	}
	c = seccomp_init(SCMP_ACT_ALLOW);
	if (c == NULL ||
	    seccomp_rule_add(c, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket),
		1, SCMP_A0(SCMP_CMP_EQ, AF_NETLINK, 0)) != 0 ||
	    seccomp_load(c) != 0) {
		fprintf(stderr, "nonetlink: cannot install the filter\n");
		return 111;
	}
	seccomp_release(c);
	execvp(argv[1], argv + 1);
	perror("nonetlink: exec");
	return 127;
}
