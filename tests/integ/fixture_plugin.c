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
 * With a ws:// or wss:// URL it opens a WebSocket through the broker
 * instead, sends the text message "hello from the sandbox", prints the
 * first message it receives as "message: TEXT", closes (1000) and waits
 * for the destination's close ("close: CODE").
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
	    SCMP_A0(SCMP_CMP_NE, AF_UNIX, 0));
	if (rv == 0)
		rv = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
		    SCMP_SYS(socketpair), 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX, 0));
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

static int
fail(struct egress_request *ws, int rv)
{
	const char *msg = egress_request_message(ws);

	fprintf(stderr, "egress-fixture-plugin: %s: %s\n",
	    egress_err_code(rv) ? egress_err_code(rv) : "error",
	    msg != NULL && msg[0] ? msg : egress_strerror(rv));
	return exit_code(rv);
}

/* One message there and back over a WebSocket, then the close. */
static int
websocket(struct egress_client *c, const char *url)
{
	static const char hello[] = "hello from the sandbox";
	struct egress_request *ws = NULL;
	struct egress_ws_frame f;
	char buf[4096];
	int rv, printed = 0;

	if ((rv = egress_ws_open(c, url, NULL, 0, NULL, NULL, NULL, &ws)) < 0)
		return fail(NULL, rv);
	if ((rv = egress_ws_wait(ws, 0)) != 0)
		return rv > 0 ? 16 : fail(ws, rv);
	rv = egress_ws_write(ws, hello, sizeof(hello) - 1, EGRESS_WS_MSG_END);
	if (rv < 0)
		return fail(ws, rv);
	for (;;) {
		if ((rv = egress_ws_recv(ws, buf, sizeof(buf), &f, 0)) < 0)
			return fail(ws, rv);
		if (f.kind == EGRESS_WS_TEXT && !printed) {
			printf("message: %.*s\n", (int)f.len, buf);
			printed = f.last;
			if (printed &&
			    (rv = egress_ws_control(ws, EGRESS_WS_CLOSE, 1000,
				 NULL, 0)) < 0)
				return fail(ws, rv);
		} else if (f.kind == EGRESS_WS_CLOSE) {
			printf("close: %u\n", f.code);
			break;
		}
	}
	(void)fflush(stdout);
	egress_request_free(ws);
	return 0;
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
	if (strcmp(u.scheme, "ws") == 0 || strcmp(u.scheme, "wss") == 0) {
		rv = websocket(c, target);
		egress_client_free(c);
		url_done(&u);
		return rv;
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
