/* SPDX-License-Identifier: ISC */
/*
 * egress-connect's SMTP STARTTLS dialog (see connect_smtp.h): blocking
 * reads and writes on the stream, each reply parsed line by line
 * ("NNN-" continues, "NNN " ends), every byte bounded.
 */
#include <string.h>

#include <egress/egress.h>

#include "shim/connect_smtp.h"

struct smtp {
	struct egress_request *s;
	char buf[SMTP_LINE_MAX];
	size_t len; /* bytes in buf */
};

/* Return 1 when the n bytes at p are a reply line "NNN" then ' ' or
 * '-' (or the end), with the code in *ret_code and the kind in
 * *ret_last; else 0. */
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

/*
 * Read one whole reply; its code in *ret_code. Bytes after its last line
 * stay in m->buf. Return 0 or an error with *ret_msg.
 */
static int
smtp_reply(struct smtp *m, int *ret_code, const char **ret_msg)
{
	size_t total = 0, eol;
	char *nl;
	int n, code = 0, first = -1, last = 0;

	while (!last) {
		nl = memchr(m->buf, '\n', m->len);
		if (nl == NULL) {
			if (m->len == sizeof(m->buf)) {
				*ret_msg = "SMTP reply line too long";
				return EGRESS_ERR_UPSTREAM_PROTOCOL;
			}
			n = egress_stream_read(m->s, m->buf + m->len,
			    sizeof(m->buf) - m->len, 0);
			if (n < 0)
				return n;
			if (n == 0) {
				*ret_msg = "the server ended the connection";
				return EGRESS_ERR_UPSTREAM_PROTOCOL;
			}
			m->len += (size_t)n;
			continue;
		}
		eol = (size_t)(nl - m->buf);
		total += eol + 1;
		if (!smtp_line(m->buf,
			eol > 0 && m->buf[eol - 1] == '\r' ? eol - 1 : eol,
			&code, &last) ||
		    (first >= 0 && code != first) || total > SMTP_REPLY_MAX) {
			*ret_msg = "not an SMTP reply";
			return EGRESS_ERR_UPSTREAM_PROTOCOL;
		}
		first = code;
		m->len -= eol + 1;
		memmove(m->buf, nl + 1, m->len);
	}
	*ret_code = code;
	return 0;
}

/* Send a command; nothing the server said may be left unread. */
static int
smtp_command(struct smtp *m, const char *cmd, const char **ret_msg)
{
	int n;

	if (m->len > 0) {
		*ret_msg = "the server sent more than its reply";
		return EGRESS_ERR_UPSTREAM_PROTOCOL;
	}
	n = egress_stream_write(m->s, cmd, strlen(cmd), 0);
	return n < 0 ? n : 0;
}

int
connect_smtp(struct egress_request *s, const char *profile,
    const char **ret_msg)
{
	static struct smtp m;
	int code, rv;

	memset(&m, 0, sizeof(m));
	m.s = s;
	*ret_msg = NULL;
	if ((rv = smtp_reply(&m, &code, ret_msg)) != 0)
		return rv;
	if (code != 220) {
		*ret_msg = "the SMTP greeting is not 220";
		return EGRESS_ERR_UPSTREAM_PROTOCOL;
	}
	if ((rv = smtp_command(&m, "EHLO localhost\r\n", ret_msg)) != 0 ||
	    (rv = smtp_reply(&m, &code, ret_msg)) != 0)
		return rv;
	if (code != 250) {
		*ret_msg = "EHLO was refused";
		return EGRESS_ERR_UPSTREAM_PROTOCOL;
	}
	if ((rv = smtp_command(&m, "STARTTLS\r\n", ret_msg)) != 0 ||
	    (rv = smtp_reply(&m, &code, ret_msg)) != 0)
		return rv;
	if (code != 220) {
		*ret_msg = "the server refused STARTTLS";
		return EGRESS_ERR_TLS_FAILED;
	}
	if (m.len > 0) {
		/* Plaintext after the go-ahead: an injection, never shown. */
		*ret_msg = "plaintext after the STARTTLS go-ahead";
		return EGRESS_ERR_TLS_FAILED;
	}
	return egress_stream_starttls(s, profile, 0);
}
