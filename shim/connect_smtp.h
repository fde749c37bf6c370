/* SPDX-License-Identifier: ISC */
/*
 * connect_smtp: egress-connect's --starttls smtp. Not part of the
 * library.
 */
#ifndef EGRESS_SHIM_CONNECT_SMTP_H
#define EGRESS_SHIM_CONNECT_SMTP_H

#include <egress/egress.h>

/* The longest SMTP reply line read (RFC 5321's 512, with room). */
#define SMTP_LINE_MAX  1024
/* The most bytes of one (multi-line) reply. */
#define SMTP_REPLY_MAX (64 * 1024)

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
