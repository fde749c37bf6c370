/* SPDX-License-Identifier: ISC */
/*
 * [upstream_proxy]: the parent HTTP proxy every upstream connection goes
 * through. Its url names it by IP address (a name would be a resolution
 * outside the broker's checks); its credentials come from an owner-only
 * file and become the Proxy-Authorization value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include <egress/error.h>

#include "conf/confint.h"

static char *
resolve(const char *dir, const char *value)
{
	char *s;

	if (value[0] == '/')
		return strdup(value);
	if (asprintf(&s, "%s/%s", dir, value) < 0)
		return NULL;
	return s;
}

/* "Basic " and the base64 of "user:password". */
static char *
basic_auth(const char *cred)
{
	size_t n = strlen(cred);
	char *out = malloc(6 + 4 * ((n + 2) / 3) + 1);

	if (out == NULL)
		return NULL;
	// NOLINTNEXTLINE(bugprone-not-null-terminated-result): EVP_EncodeBlock ends it
	memcpy(out, "Basic ", 6);
	(void)EVP_EncodeBlock((unsigned char *)out + 6,
	    (const unsigned char *)cred, (int)n);
	return out;
}

int
conf_upstream_proxy(const char *cpath, const char *dir,
    const struct conf_val *u, const struct conf_val *c,
    struct conf_snapshot *s, struct conf_errors *errs)
{
	const char *why = NULL;
	struct policy_dest d;
	struct policy_err e;
	char *path = NULL, *cred = NULL;
	int nomem = 0;

	if (u == NULL || u->str == NULL || u->str[0] == '\0') {
		if (c != NULL && c->str != NULL && c->str[0] != '\0')
			conf_errors_addf(errs,
			    "%s:%d: [upstream_proxy] credentials_file: set "
			    "without url",
			    cpath, c->line);
		return 0;
	}
	if (policy_url_parse(u->str, strlen(u->str), &d, &e) != 0 ||
	    strcmp(d.scheme, "http") != 0 || d.host.kind == POLICY_HOST_NAME ||
	    d.path_len > 1) {
		/* Not quoted when it may hold a password. */
		int secret = strchr(u->str, '@') != NULL;

		conf_errors_addf(errs,
		    "%s:%d: [upstream_proxy] url: '%s': write "
		    "http://ADDRESS:PORT with the parent proxy's IP address "
		    "(a name would be a resolution outside the broker's "
		    "checks%s)",
		    cpath, u->line,
		    secret ? "(not shown: it has userinfo)" : u->str,
		    secret ? "; credentials go in credentials_file" : "");
		return 0;
	}
	s->upstream_proxy_addr.family = d.host.kind == POLICY_HOST_IPV4 ?
	    4 :
	    6;
	memcpy(s->upstream_proxy_addr.bytes, d.host.addr, 16);
	s->upstream_proxy_port = d.port;
	if ((s->upstream_proxy_url = strdup(u->str)) == NULL)
		return EGRESS_ERR_NOMEM;
	if (c == NULL || c->str == NULL || c->str[0] == '\0')
		return 0;
	if ((path = resolve(dir, c->str)) == NULL ||
	    conf_track_file(s, path, CONF_TOKEN_MAX + 2) != 0)
		nomem = 1;
	else if ((cred = conf_credentials_read(path, &why)) == NULL)
		conf_errors_addf(errs,
		    "%s:%d: [upstream_proxy] credentials_file: %s %s", cpath,
		    c->line, path, why);
	else if ((s->upstream_proxy_auth = basic_auth(cred)) == NULL)
		nomem = 1;
	if (cred != NULL) {
		explicit_bzero(cred, strlen(cred));
		free(cred);
	}
	free(path);
	return nomem ? EGRESS_ERR_NOMEM : 0;
}
