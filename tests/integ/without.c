/* SPDX-License-Identifier: ISC */
/*
 * without: run a program without a kernel feature, as a sandbox or an
 * older kernel would leave it. Usage: without FEATURE PROGRAM [ARG...],
 * where FEATURE is
 *   netlink   socket(AF_NETLINK, ...) fails with EAFNOSUPPORT, as
 *             systemd's RestrictAddressFamilies= without AF_NETLINK makes
 *             it fail;
 *   landlock  landlock_create_ruleset() fails with ENOSYS, as on a kernel
 *             before 5.13 or one built without Landlock.
 * Exits 2 on a usage error, 111 when the filter cannot be installed, 127
 * when PROGRAM cannot be run.
 */
#include <sys/socket.h>
#include <sys/syscall.h>

#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif

static int
add_rule(scmp_filter_ctx c, const char *feature)
{
	if (strcmp(feature, "netlink") == 0)
		return seccomp_rule_add(c, SCMP_ACT_ERRNO(EAFNOSUPPORT),
		    SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, AF_NETLINK, 0));
	if (strcmp(feature, "landlock") == 0)
		return seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS),
		    SYS_landlock_create_ruleset, 0);
	return -EINVAL;
}

int
main(int argc, char **argv)
{
	scmp_filter_ctx c;
	int rc;

	if (argc < 3) {
		fprintf(stderr,
		    "usage: without netlink|landlock PROGRAM [ARG...]\n");
		return 2;
	}
	if ((c = seccomp_init(SCMP_ACT_ALLOW)) == NULL) {
		fprintf(stderr, "without: cannot install the filter\n");
		return 111;
	}
	rc = add_rule(c, argv[1]);
	if (rc == -EINVAL) {
		fprintf(stderr, "without: unknown feature '%s'\n", argv[1]);
		return 2;
	}
	if (rc != 0 || seccomp_load(c) != 0) {
		fprintf(stderr, "without: cannot install the filter\n");
		return 111;
	}
	seccomp_release(c);
	execvp(argv[2], argv + 2);
	perror("without: exec");
	return 127;
}
