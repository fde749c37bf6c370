/* SPDX-License-Identifier: ISC */
/*
 * egress-connect's WebSocket mode (ws:// and wss:// URLs): each line of
 * stdin (without its newline; a last line without one too) is one text
 * message, or one binary message with --binary; each received message is
 * written to stdout followed by a newline. Once stdin ended and every
 * line went out, the tool sends close 1000 and waits for the
 * destination's close. A close other than 1000, 1001 or 1005 (1006: the
 * destination ended without one) is printed to stderr and exits with the
 * upstream-protocol status; a refused upgrade (a status other than 101,
 * never followed) prints "refused: HTTP STATUS" and exits the same way.
 * With --ping a ping goes out first and its pong is printed to stderr.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <egress/egress.h>

#include "shim/connect_ws.h"
#include "shim/tool.h"

#define LINE_MAX_BYTES (16 * 1024 * 1024)

struct ws_relay {
	struct egress_client *c;
	struct egress_request *s;
	int binary;
	char *in; /* stdin bytes not yet sent */
	size_t len, cap;
	size_t sent; /* bytes of the current line already queued */
	int in_eof;  /* stdin ended */
	int closing; /* our close went out */
	int closed;  /* the destination's close arrived */
	unsigned code;
	char out[64 * 1024];
};

static void
ws_die(struct ws_relay *r, int err)
{
	const char *msg = NULL;
	const char *code = tool_err_text(err, egress_request_message(r->s),
	    &msg);

	fprintf(stderr, "egress-connect: %s: %s\n", code, msg);
	exit(tool_exit_code(err));
}

static void
ws_write_all(const char *buf, size_t n)
{
	ssize_t k;

	while (n > 0) {
		k = write(STDOUT_FILENO, buf, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			fprintf(stderr, "egress-connect: error: stdout: %s\n",
			    strerror(errno));
			exit(TOOL_EXIT_LOCAL);
		}
		buf += k;
		n -= (size_t)k;
	}
}

/* Send every complete line (and the last one at end of input). */
static void
ws_send_lines(struct ws_relay *r)
{
	char *nl;
	size_t line, off = 0;
	int n, flags;

	while (off < r->len) {
		nl = memchr(r->in + off, '\n', r->len - off);
		if (nl == NULL && !r->in_eof)
			break;
		line = nl != NULL ? (size_t)(nl - (r->in + off)) :
				    r->len - off;
		flags = EGRESS_NONBLOCK | EGRESS_WS_MSG_END |
		    (r->binary ? EGRESS_WS_MSG_BINARY : 0);
		n = egress_ws_write(r->s, r->in + off + r->sent,
		    line - r->sent, flags);
		if (n == EGRESS_ERR_AGAIN)
			break;
		if (n < 0)
			ws_die(r, n);
		r->sent += (size_t)n;
		if (r->sent < line)
			continue; /* one frame went: more may fit now */
		off += line + (nl != NULL ? 1 : 0);
		r->sent = 0;
	}
	if (off > 0 && r->len > off)
		memmove(r->in, r->in + off, r->len - off);
	r->len -= off;
}

/* Move what can move; return 1 once the close handshake is over. */
static int
ws_step(struct ws_relay *r)
{
	struct egress_ws_frame f;
	int n;

	ws_send_lines(r);
	if (r->in_eof && r->len == 0 && !r->closing && !r->closed) {
		n = egress_ws_control(r->s, EGRESS_WS_CLOSE, 1000, NULL, 0);
		if (n < 0 && n != EGRESS_ERR_CLOSED)
			ws_die(r, n);
		r->closing = 1;
	}
	while (!r->closed) {
		n = egress_ws_recv(r->s, r->out, sizeof(r->out), &f,
		    EGRESS_NONBLOCK);
		if (n == EGRESS_ERR_AGAIN)
			break;
		if (n < 0)
			ws_die(r, n);
		switch (f.kind) {
		case EGRESS_WS_TEXT:
		case EGRESS_WS_BINARY:
			ws_write_all(r->out, f.len);
			if (f.last)
				ws_write_all("\n", 1);
			break;
		case EGRESS_WS_PONG:
			fputs("egress-connect: pong: ", stderr);
			tool_put_escaped(stderr, r->out, f.len);
			fputc('\n', stderr);
			break;
		case EGRESS_WS_CLOSE:
			r->closed = 1;
			r->code = f.code;
			if (f.code != 1000 && f.code != 1001 &&
			    f.code != 1005 && f.code != 0) {
				fprintf(stderr, "egress-connect: closed: %u%s",
				    f.code, f.len > 0 ? ": " : "");
				tool_put_escaped(stderr, r->out, f.len);
				fputc('\n', stderr);
			}
			break;
		default:
			break; /* a ping: the broker answered it */
		}
	}
	return r->closed;
}

static void
ws_read_stdin(struct ws_relay *r)
{
	ssize_t k;
	char *p;

	if (r->cap - r->len < 64 * 1024) {
		if (r->cap >= LINE_MAX_BYTES) {
			fprintf(stderr,
			    "egress-connect: error: a line over "
			    "16 MiB\n");
			exit(TOOL_EXIT_LOCAL);
		}
		p = realloc(r->in, r->cap * 2 + 64 * 1024);
		if (p == NULL) {
			fprintf(stderr,
			    "egress-connect: error: out of "
			    "memory\n");
			exit(TOOL_EXIT_LOCAL);
		}
		r->in = p;
		r->cap = r->cap * 2 + 64 * 1024;
	}
	k = read(STDIN_FILENO, r->in + r->len, r->cap - r->len);
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (k < 0) {
		fprintf(stderr, "egress-connect: error: stdin: %s\n",
		    strerror(errno));
		exit(TOOL_EXIT_LOCAL);
	}
	if (k == 0)
		r->in_eof = 1;
	r->len += (size_t)k;
}

int
connect_ws(struct egress_client *c, const char *url, const char *profile,
    const struct egress_header *headers, size_t nheaders, int binary, int ping)
{
	static struct ws_relay r;
	const struct egress_header *h;
	struct pollfd pfd[2];
	size_t i, nh;
	int rv, timeout;
	nfds_t n;

	r.c = c;
	r.binary = binary;
	rv = egress_ws_open_profile(c, url, profile, headers, nheaders, NULL,
	    NULL, NULL, &r.s);
	if (rv < 0) {
		fprintf(stderr, "egress-connect: invalid-request: %s\n",
		    rv == EGRESS_ERR_INVALID ? "URL must be ws://... or "
					       "wss://..." :
					       egress_strerror(rv));
		return rv == EGRESS_ERR_INVALID ?
		    TOOL_EXIT_USAGE :
		    tool_exit_code(rv);
	}
	if ((rv = egress_ws_wait(r.s, 0)) < 0)
		ws_die(&r, rv);
	if (rv > 0) {
		fprintf(stderr, "egress-connect: refused: HTTP %d\n", rv);
		h = egress_response_headers(r.s, &nh);
		for (i = 0; h != NULL && i < nh; i++) {
			fputs("egress-connect: < ", stderr);
			tool_put_escaped(stderr, h[i].name, strlen(h[i].name));
			fputs(": ", stderr);
			tool_put_escaped(stderr, h[i].value,
			    strlen(h[i].value));
			fputc('\n', stderr);
		}
		return tool_exit_code(EGRESS_ERR_UPSTREAM_PROTOCOL);
	}
	if (ping &&
	    (rv = egress_ws_control(r.s, EGRESS_WS_PING, 0, "egress-connect",
		 14)) < 0)
		ws_die(&r, rv);
	while (!ws_step(&r)) {
		pfd[0].fd = egress_client_fd(c);
		pfd[0].events = POLLIN |
		    (egress_client_want_write(c) ? POLLOUT : 0);
		pfd[1].fd = STDIN_FILENO;
		pfd[1].events = POLLIN;
		pfd[0].revents = pfd[1].revents = 0;
		n = !r.in_eof ? 2 : 1;
		timeout = egress_client_timeout_ms(c);
		if (poll(pfd, n, timeout) < 0 && errno != EINTR) {
			fprintf(stderr, "egress-connect: error: poll: %s\n",
			    strerror(errno));
			return TOOL_EXIT_LOCAL;
		}
		if (n == 2 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
			ws_read_stdin(&r);
		if ((rv = egress_client_step(c)) < 0)
			ws_die(&r, rv);
	}
	while (egress_client_want_write(c)) {
		pfd[0].fd = egress_client_fd(c);
		pfd[0].events = POLLIN | POLLOUT;
		pfd[0].revents = 0;
		if (poll(pfd, 1, -1) < 0 && errno != EINTR)
			return TOOL_EXIT_LOCAL;
		if (egress_client_step(c) < 0)
			break;
	}
	egress_request_free(r.s);
	free(r.in);
	if (r.code == 1000 || r.code == 1001 || r.code == 1005 || r.code == 0)
		return 0;
	return tool_exit_code(EGRESS_ERR_UPSTREAM_PROTOCOL);
}
