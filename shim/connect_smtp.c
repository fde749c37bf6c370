/* SPDX-License-Identifier: ISC */
/*
 * egress-connect's SMTP STARTTLS dialog (see connect_smtp.h): blocking
 * reads and writes on the stream; each reply is scanned whole from what
 * was read (smtp_reply_scan(), "NNN-" continues, "NNN " ends), every
 * byte bounded, and what follows a reply is never taken as the next one:
 * the server speaks only when it is its turn.
 */
#include <string.h>

#include <egress/egress.h>

#include "shim/connect_smtp.h"

/* Return 1 when the n bytes at p (without the line end) are a reply line
 * "NNN" then ' ' or '-' (or nothing), with the code in *ret_code and
 * whether it is the last line in *ret_last; else 0. */
static int
smtp_line(const char *p, size_t n, int *ret_code, int *ret_last)
{
	if (n < 3 || p[0] < '2' || p[0] > '5' || p[1] < '0' || p[1] > '9' ||
	    p[2] < '0' || p[2] > '9' || (n > 3 && p[3] != ' ' && p[3] != '-'))
		return 0;
	*ret_code = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
	*ret_last = n == 3 || p[3] == ' ';
	return 1;
}

int
smtp_reply_scan(const char *p, size_t n, int *ret_code)
{
	size_t off = 0, len;
	const char *nl;
	int code = 0, first = -1, last = 0;

	while (!last) {
		nl = memchr(p + off, '\n', n - off);
		if (nl == NULL)
			return n - off >= SMTP_LINE_MAX ||
				n >= SMTP_REPLY_MAX ?
			    -1 :
			    0;
		len = (size_t)(nl - (p + off));
		if (len + 1 > SMTP_LINE_MAX)
			return -1;
		if (len > 0 && p[off + len - 1] == '\r')
			len--;
		if (!smtp_line(p + off, len, &code, &last) ||
		    (first >= 0 && code != first))
			return -1;
		first = code;
		off = (size_t)(nl - p) + 1;
		if (off > SMTP_REPLY_MAX)
			return -1;
	}
	*ret_code = code;
	return (int)off;
}

enum smtp_go
smtp_starttls_answer(const char *p, size_t n)
{
	int code = 0, len = smtp_reply_scan(p, n, &code);

	if (len < 0)
		return SMTP_GO_BAD;
	if (len == 0)
		return SMTP_GO_MORE;
	if (code != 220)
		return SMTP_GO_REFUSED;
	return (size_t)len == n ? SMTP_GO_UPGRADE : SMTP_GO_INJECTED;
}

struct smtp {
	struct egress_request *s;
	char buf[SMTP_REPLY_MAX];
	size_t len; /* bytes in buf */
};

/* Read until buf holds one whole reply (or more). Return its length
 * with its code in *ret_code, or an error with *ret_msg. */
static int
smtp_read_reply(struct smtp *m, int *ret_code, const char **ret_msg)
{
	int n, len;

	while ((len = smtp_reply_scan(m->buf, m->len, ret_code)) == 0) {
		n = egress_stream_read(m->s, m->buf + m->len,
		    sizeof(m->buf) - m->len, 0);
		if (n < 0)
			return n;
		if (n == 0) {
			*ret_msg = "the server ended the connection";
			return EGRESS_ERR_UPSTREAM_PROTOCOL;
		}
		m->len += (size_t)n;
	}
	if (len < 0) {
		*ret_msg = "not an SMTP reply";
		return EGRESS_ERR_UPSTREAM_PROTOCOL;
	}
	return len;
}

/* Send cmd and read the whole reply, which must be want and all the
 * server sent. Return 0 or an error with *ret_msg. */
static int
smtp_exchange(struct smtp *m, const char *cmd, int want, const char *what,
    const char **ret_msg)
{
	int code = 0, n;

	if (cmd != NULL &&
	    (n = egress_stream_write(m->s, cmd, strlen(cmd), 0)) < 0)
		return n;
	if ((n = smtp_read_reply(m, &code, ret_msg)) < 0)
		return n;
	if (code != want) {
		*ret_msg = what;
		return EGRESS_ERR_UPSTREAM_PROTOCOL;
	}
	if ((size_t)n != m->len) {
		*ret_msg = "the server sent more than its reply";
		return EGRESS_ERR_UPSTREAM_PROTOCOL;
	}
	m->len = 0;
	return 0;
}

int
connect_smtp(struct egress_request *s, const char *profile,
    const char **ret_msg)
{
	static struct smtp m;
	int code = 0, rv;

	memset(&m, 0, sizeof(m));
	m.s = s;
	*ret_msg = NULL;
	if ((rv = smtp_exchange(&m, NULL, 220, "the SMTP greeting is not 220",
		 ret_msg)) != 0 ||
	    (rv = smtp_exchange(&m, "EHLO localhost\r\n", 250,
		 "EHLO was refused", ret_msg)) != 0)
		return rv;
	if ((rv = egress_stream_write(s, "STARTTLS\r\n", 10, 0)) < 0 ||
	    (rv = smtp_read_reply(&m, &code, ret_msg)) < 0)
		return rv;
	switch (smtp_starttls_answer(m.buf, m.len)) {
	case SMTP_GO_UPGRADE:
		return egress_stream_starttls(s, profile, 0);
	case SMTP_GO_INJECTED:
		/* Plaintext after the go-ahead: never shown. */
		*ret_msg = "plaintext after the STARTTLS go-ahead";
		return EGRESS_ERR_TLS_FAILED;
	case SMTP_GO_REFUSED:
		*ret_msg = "the server refused STARTTLS";
		return EGRESS_ERR_TLS_FAILED;
	default:
		*ret_msg = "not an SMTP reply";
		return EGRESS_ERR_UPSTREAM_PROTOCOL;
	}
}
