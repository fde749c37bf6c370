/* SPDX-License-Identifier: ISC */
/*
 * egress-fixture-plugin: a stand-in for a plugin runtime, for the
 * integration tests. It first confines itself with a seccomp filter
 * (libseccomp) under which socket() and socketpair() fail with EPERM for
 * every family but AF_UNIX, shows that its own socket(AF_INET) and
 * socket(AF_INET6) now fail with EPERM, then fetches the URL given on the
 * command line through the broker with the shim (egress_fetch()) and
 * prints the outcome. Usage:
 *     egress-fixture-plugin [--socket PATH] URL    (or EGRESS_FD=N)
 * Output on stdout: "socket(AF_INET): EPERM", "socket(AF_INET6): EPERM",
 * "status: N", a blank line, then the body. Exit 0 when a response
 * arrived; 3 when a direct socket was not refused with EPERM (the
 * sandbox failed: no request is sent); on a request error,
 * "egress-fixture-plugin: CODE: message" on stderr and the exit status of
 * egress-fetch for that code (10..19), 1 for other failures, 2 for usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <seccomp.h>

#include <egress/egress.h>

#include "shim/url.h"

#define BODY_MAX (64UL * 1024 * 1024)

static int
exit_code(int err)
{
	if (err <= EGRESS_ERR_DENIED && err >= EGRESS_ERR_CANCELLED)
		return 9 - err; /* -1 -> 10 ... -10 -> 19 */
	return 1;
}

/* Refuse socket() and socketpair() for every family but AF_UNIX. */
static int
sandbox(void)
{
	scmp_filter_ctx ctx;
	int rv;

	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (ctx == NULL)
		return -1;
	rv = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
	    SCMP_A0(SCMP_CMP_NE, AF_UNIX));
	if (rv == 0)
		rv = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
		    SCMP_SYS(socketpair), 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
	if (rv == 0)
		rv = seccomp_load(ctx);
	seccomp_release(ctx);
	return rv == 0 ? 0 : -1;
}

/* Show that a direct socket of family af fails with EPERM. */
static int
probe(int af, const char *name)
{
	int fd, e;

	fd = socket(af, SOCK_STREAM | SOCK_CLOEXEC, 0);
	e = errno;
	if (fd >= 0) {
		(void)close(fd);
		printf("socket(%s): allowed\n", name);
		return -1;
	}
	printf("socket(%s): %s\n", name, e == EPERM ? "EPERM" : strerror(e));
	return e == EPERM ? 0 : -1;
}

int
main(int argc, char **argv)
{
	struct egress_client *c = NULL;
	struct egress_response *resp = NULL;
	struct egress_request_head head;
	const char *path = NULL, *target;
	char msg[EGRESS_MESSAGE_MAX + 1];
	struct url u;
	int rv;

	if (argc == 4 && strcmp(argv[1], "--socket") == 0) {
		path = argv[2];
		target = argv[3];
	} else if (argc == 2)
		target = argv[1];
	else {
		fprintf(stderr,
		    "usage: egress-fixture-plugin [--socket PATH] "
		    "URL\n");
		return 2;
	}
	if (url_parse(target, &u) != 0) {
		fprintf(stderr, "egress-fixture-plugin: not a URL: %s\n",
		    target);
		return 2;
	}
	if (sandbox() != 0) {
		fprintf(stderr, "egress-fixture-plugin: seccomp failed\n");
		return 1;
	}
	if (probe(AF_INET, "AF_INET") != 0 || probe(AF_INET6, "AF_INET6") != 0)
		return 3;
	(void)fflush(stdout);

	rv = path != NULL ? egress_client_connect(path, &c) :
			    egress_client_from_env(&c);
	if (rv < 0) {
		fprintf(stderr, "egress-fixture-plugin: %s: %s\n",
		    egress_err_code(rv) ? egress_err_code(rv) : "error",
		    egress_strerror(rv));
		return exit_code(rv);
	}
	memset(&head, 0, sizeof(head));
	head.method = "GET";
	head.scheme = u.scheme;
	head.authority = u.authority;
	head.path = u.target;
	rv = egress_fetch(c, &head, NULL, 0, BODY_MAX, &resp, msg,
	    sizeof(msg));
	if (rv < 0) {
		fprintf(stderr, "egress-fixture-plugin: %s: %s\n",
		    egress_err_code(rv) ? egress_err_code(rv) : "error", msg);
		egress_client_free(c);
		url_done(&u);
		return exit_code(rv);
	}
	printf("status: %d\n\n", resp->status);
	(void)fwrite(resp->body, 1, resp->body_len, stdout);
	(void)fflush(stdout);
	egress_response_free(resp);
	egress_client_free(c);
	url_done(&u);
	return 0;
}
