/* SPDX-License-Identifier: ISC */
/*
 * connect_smtp: egress-connect's --starttls smtp. Not part of the
 * library.
 */
#ifndef EGRESS_SHIM_CONNECT_SMTP_H
#define EGRESS_SHIM_CONNECT_SMTP_H

#include <stddef.h>

#include <egress/egress.h>

/* The longest SMTP reply line read (RFC 5321's 512, with room). */
#define SMTP_LINE_MAX  1024
/* The most bytes of one (multi-line) reply. */
#define SMTP_REPLY_MAX (64 * 1024)

/*
 * Scan the n bytes at p for one whole SMTP reply: lines of a 3-digit
 * code then '-' (more lines follow) or ' ' or nothing (the last), each
 * ended by LF (CRLF too), each at most SMTP_LINE_MAX bytes, all of one
 * code, at most SMTP_REPLY_MAX bytes in all. Return the reply's length
 * (> 0; bytes after it are not looked at) with its code in *ret_code,
 * 0 when it is not complete yet, or -1 when the bytes are not such a
 * reply (or too long).
 */
int smtp_reply_scan(const char *p, size_t n, int *ret_code);

/* What the n bytes received after the STARTTLS command allow. */
enum smtp_go {
	SMTP_GO_MORE = 0,     /* the reply is not complete: read more */
	SMTP_GO_UPGRADE = 1,  /* exactly one 220 reply: upgrade now */
	SMTP_GO_REFUSED = 2,  /* a whole reply, not 220 */
	SMTP_GO_INJECTED = 3, /* a 220 reply and bytes after it */
	SMTP_GO_BAD = 4,      /* not an SMTP reply */
};

/* Decide, from the n bytes at p received after STARTTLS, whether the
 * stream may be upgraded: only when they are exactly one 220 reply. */
enum smtp_go smtp_starttls_answer(const char *p, size_t n);

/*
 * On s, a connected tcp stream, speak just enough SMTP to start TLS, as
 * `openssl s_client -starttls smtp` does: read the 220 greeting, send
 * EHLO and read its (multi-line) 250 reply, send STARTTLS and read its
 * 220; then upgrade s with egress_stream_starttls() and profile
 * (borrowed; NULL: the broker's default trust). Nothing of the dialog
 * is printed. Any byte after a reply before the next command is ours to
 * send is refused; after the STARTTLS go-ahead it is an injection and
 * is never shown. Return 0 once s is TLS, or an EGRESS_ERR_* with
 * *ret_msg set to a static detail (NULL: the stream's message):
 * EGRESS_ERR_UPSTREAM_PROTOCOL for a reply that is not SMTP or not
 * the one due, EGRESS_ERR_TLS_FAILED when the server refused STARTTLS
 * or the upgrade failed, or the stream's error.
 */
int connect_smtp(struct egress_request *s, const char *profile,
    const char **ret_msg);

#endif /* EGRESS_SHIM_CONNECT_SMTP_H */
