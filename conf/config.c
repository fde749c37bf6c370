/* SPDX-License-Identifier: ISC */
/*
 * The configuration file: its sections and keys (a fixed schema; anything
 * else is an error), their defaults and validation, relative paths
 * resolved against the file's folder, the referenced manifests and trusted
 * keys, and the immutable snapshot built from them. Every error of the
 * file is collected ("FILE:LINE: [section] key: message") and any error
 * means no snapshot; a broken manifest refuses only its own instances.
 * Also staleness detection by stat identity for the per-request re-read.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "conf/confint.h"

#define CONFIG_FILE_MAX	     (16 * 1024 * 1024)
#define MS_MIN		     1
#define MS_MAX		     3600000
#define CONN_MAX	     65535
#define RESOLVER_SERVERS_MAX 16
#define ENTRIES_PREFIX	     "plugins.entries."

_Static_assert(sizeof(uid_t) == sizeof(unsigned) &&
	sizeof(gid_t) == sizeof(unsigned),
    "ids are stored as unsigned");

/* Defaults (docs/configuration.md). */
#define DEF_SIG_MODE	     CONF_SIG_PERMISSIVE
#define DEF_MAX_CONN	     16
#define DEF_SOCKET_DIR	     "/run/egressd/instances"
#define DEF_CONTROL_SOCKET   "/run/egressd/control.sock"
#define DEF_DRAIN_MS	     5000
#define DEF_RESOLVER_MS	     5000
#define DEF_CONNECT_MS	     10000
#define DEF_FIRST_BYTE_MS    30000
#define DEF_BETWEEN_BYTES_MS 30000
#define DEF_STREAM_IDLE_MS   300000
#define DEF_STREAM_LIFE_MS   3600000

static const struct conf_keydef security_keys[] = {
	{ "nat64_prefixes", 1 },
	{ NULL, 0 },
};
static const struct conf_keydef plugins_keys[] = {
	{ "package_dir", 0 },
	{ NULL, 0 },
};
static const struct conf_keydef plugins_security_keys[] = {
	{ "signature_mode", 0 },
	{ "trusted_keys", 1 },
	{ NULL, 0 },
};
static const struct conf_keydef plugins_limits_keys[] = {
	{ "max_connections_per_instance", 0 },
	{ NULL, 0 },
};
static const struct conf_keydef broker_keys[] = {
	{ "instance_socket_dir", 0 },
	{ "control_socket", 0 },
	{ "log", 0 },
	{ "drain_timeout_ms", 0 },
	{ "busy_poll_us", 0 },
	{ "adaptive_poll_us", 0 },
	{ "memory_max", 0 },
	{ "control_uids", 1 },
	{ "control_gids", 1 },
	{ NULL, 0 },
};
static const struct conf_keydef resolver_keys[] = {
	{ "servers", 1 },
	{ "timeout_ms", 0 },
	{ NULL, 0 },
};
static const struct conf_keydef limits_keys[] = {
	{ "connect_timeout_ms", 0 },
	{ "first_byte_timeout_ms", 0 },
	{ "between_bytes_timeout_ms", 0 },
	{ "stream_idle_timeout_ms", 0 },
	{ "stream_max_lifetime_ms", 0 },
	{ "websocket_max_message_bytes", 0 },
	{ "extra_methods", 1 },
	{ NULL, 0 },
};
static const struct conf_keydef tls_keys[] = {
	{ "ca_file", 0 },
	{ "inspect_ca_cert", 0 },
	{ "inspect_ca_key", 0 },
	{ NULL, 0 },
};
static const struct conf_keydef metrics_keys[] = {
	{ "listen", 0 },
	{ NULL, 0 },
};
static const struct conf_keydef upstream_proxy_keys[] = {
	{ "url", 0 },
	{ "credentials_file", 0 },
	{ NULL, 0 },
};
static const struct conf_keydef entry_keys[] = {
	{ "plugin", 0 },
	{ "manifest", 0 },
	{ "permissions", 1 },
	{ "egress_hosts", 1 },
	{ "egress_allow_private", 1 },
	{ "egress_allow_loopback", 1 },
	{ "socket_owner", 0 },
	{ "socket_group", 0 },
	{ "proxy_listen", 0 },
	{ "proxy_token_file", 0 },
	{ "stream_idle_timeout_ms", 0 },
	{ "stream_max_lifetime_ms", 0 },
	{ "tls_profiles", 1 },
	{ "tls_inspect", 0 },
	{ NULL, 0 },
};

enum {
	SEC_SECURITY,
	SEC_PLUGINS,
	SEC_PLUGINS_SECURITY,
	SEC_PLUGINS_LIMITS,
	SEC_BROKER,
	SEC_RESOLVER,
	SEC_LIMITS,
	SEC_TLS,
	SEC_METRICS,
	SEC_UPSTREAM_PROXY,
	SEC_NFIXED,
};

static const struct {
	const char *name;
	const struct conf_keydef *keys;
} fixed_secs[SEC_NFIXED] = {
	[SEC_SECURITY] = { "security", security_keys },
	[SEC_PLUGINS] = { "plugins", plugins_keys },
	[SEC_PLUGINS_SECURITY] = { "plugins.security", plugins_security_keys },
	[SEC_PLUGINS_LIMITS] = { "plugins.limits", plugins_limits_keys },
	[SEC_BROKER] = { "broker", broker_keys },
	[SEC_RESOLVER] = { "resolver", resolver_keys },
	[SEC_LIMITS] = { "limits", limits_keys },
	[SEC_TLS] = { "tls", tls_keys },
	[SEC_METRICS] = { "metrics", metrics_keys },
	[SEC_UPSTREAM_PROXY] = { "upstream_proxy", upstream_proxy_keys },
};

struct cfg_parse {
	const char *path;
	const char *dir;
	struct conf_errors *errs;
	struct conf_sec fixed[SEC_NFIXED];
	int have[SEC_NFIXED];
	struct conf_sec **entries;
	size_t nentries;
	struct conf_sec **profiles; /* [tls.profiles.NAME] */
	size_t nprofiles;
	int nomem;
};

/* A [tls.profiles.NAME] section (tlsprof.c builds it). */
static struct conf_sec *
cfg_profile_section(struct cfg_parse *cp, const char *path, const char *name,
    int line, struct conf_errors *errs)
{
	const char *pname = name + strlen(CONF_TLS_PROFILES_PREFIX);
	struct conf_sec *sec, **v;

	if (!conf_name_is_valid(pname, 0)) {
		conf_errors_addf(errs,
		    "%s:%d: [%s]: '%s' is not a profile name: 1 to %d bytes "
		    "of a-z, 0-9, '.', '_', '-', starting with a letter or "
		    "digit, without '..'",
		    path, line, name, pname, CONF_NAME_MAX);
		return NULL;
	}
	/* NOLINTBEGIN(bugprone-sizeof-expression): an array of pointers */
	if ((sec = calloc(1, sizeof(*sec))) == NULL ||
	    (v = realloc(cp->profiles, (cp->nprofiles + 1) * sizeof(*v))) ==
		NULL) {
		free(sec);
		cp->nomem = 1;
		return NULL;
	}
	/* NOLINTEND(bugprone-sizeof-expression) */
	cp->profiles = v;
	if (conf_sec_init(sec, name, line, conf_tls_profile_keys) != 0) {
		free(sec);
		cp->nomem = 1;
		return NULL;
	}
	cp->profiles[cp->nprofiles++] = sec;
	return sec;
}

static struct conf_sec *
cfg_section(void *ctx, const char *path, const char *name, int line,
    struct conf_errors *errs)
{
	struct cfg_parse *cp = ctx;
	struct conf_sec *sec, **v;
	const char *inst;
	size_t i;

	for (i = 0; i < SEC_NFIXED; i++) {
		if (strcmp(name, fixed_secs[i].name) != 0)
			continue;
		if (conf_sec_init(&cp->fixed[i], name, line,
			fixed_secs[i].keys) != 0) {
			cp->nomem = 1;
			return NULL;
		}
		cp->have[i] = 1;
		return &cp->fixed[i];
	}
	if (strcmp(name, "plugins.entries") == 0) {
		conf_errors_addf(errs,
		    "%s:%d: [%s]: an entry needs the "
		    "instance's name: write [plugins.entries.NAME]",
		    path, line, name);
		return NULL;
	}
	if (strcmp(name, "tls.profiles") == 0) {
		conf_errors_addf(errs,
		    "%s:%d: [%s]: a profile needs a name: write "
		    "[tls.profiles.NAME]",
		    path, line, name);
		return NULL;
	}
	if (strncmp(name, CONF_TLS_PROFILES_PREFIX,
		strlen(CONF_TLS_PROFILES_PREFIX)) == 0)
		return cfg_profile_section(cp, path, name, line, errs);
	if (strncmp(name, ENTRIES_PREFIX, strlen(ENTRIES_PREFIX)) != 0) {
		conf_errors_addf(errs,
		    "%s:%d: [%s]: unknown section; the "
		    "sections are [security], [plugins], [plugins.security], "
		    "[plugins.limits], [plugins.entries.NAME], [broker], "
		    "[resolver], [limits], [tls], [tls.profiles.NAME], "
		    "[metrics] and [upstream_proxy]",
		    path, line, name);
		return NULL;
	}
	inst = name + strlen(ENTRIES_PREFIX);
	if (!conf_name_is_valid(inst, 0)) {
		conf_errors_addf(errs,
		    "%s:%d: [%s]: '%s' is not an instance "
		    "name: 1 to %d bytes of a-z, 0-9, '.', '_', '-', "
		    "starting with a letter or digit, without '..' (it "
		    "names the instance's socket file)",
		    path, line, name, inst, CONF_NAME_MAX);
		return NULL;
	}
	/* NOLINTBEGIN(bugprone-sizeof-expression): an array of pointers */
	if ((sec = calloc(1, sizeof(*sec))) == NULL ||
	    (v = realloc(cp->entries, (cp->nentries + 1) * sizeof(*v))) ==
		NULL) {
		free(sec);
		cp->nomem = 1;
		return NULL;
	}
	/* NOLINTEND(bugprone-sizeof-expression) */

	cp->entries = v;
	if (conf_sec_init(sec, name, line, entry_keys) != 0) {
		free(sec);
		cp->nomem = 1;
		return NULL;
	}
	cp->entries[cp->nentries++] = sec;
	return sec;
}

static void
cfg_parse_done(struct cfg_parse *cp)
{
	size_t i;

	for (i = 0; i < SEC_NFIXED; i++)
		conf_sec_done(&cp->fixed[i]);
	for (i = 0; i < cp->nentries; i++) {
		conf_sec_done(cp->entries[i]);
		free(cp->entries[i]);
	}
	free(cp->entries);
	for (i = 0; i < cp->nprofiles; i++) {
		conf_sec_done(cp->profiles[i]);
		free(cp->profiles[i]);
	}
	free(cp->profiles);
}

/* The value of key in fixed section idx, or NULL when the section or the
 * key is absent. */
static const struct conf_val *
fixed_val(const struct cfg_parse *cp, int idx, const char *key)
{
	const struct conf_val *v;

	if (!cp->have[idx])
		return NULL;
	v = conf_sec_cval(&cp->fixed[idx], key);
	return v != NULL && v->line != 0 ? v : NULL;
}

/* ---- Values ------------------------------------------------------------ */

static char *
resolve_path(const char *dir, const char *value)
{
	char *s;

	if (value[0] == '/')
		return strdup(value);
	if (asprintf(&s, "%s/%s", dir, value) < 0)
		return NULL;
	return s;
}

/* A path value: resolved against the folder; *ret stays when unset. */
static int
get_path(struct cfg_parse *cp, int idx, const char *key, char **ret)
{
	const struct conf_val *v = fixed_val(cp, idx, key);
	char *s;

	if (v == NULL || v->str == NULL)
		return 0;
	if ((s = resolve_path(cp->dir, v->str)) == NULL) {
		cp->nomem = 1;
		return EGRESS_ERR_NOMEM;
	}
	if (strlen(s) >= PATH_MAX) {
		free(s);
		return conf_errors_addf(cp->errs,
		    "%s:%d: [%s] %s: the path "
		    "is longer than %d bytes once resolved",
		    cp->path, v->line, fixed_secs[idx].name, key,
		    PATH_MAX - 1);
	}
	free(*ret);
	*ret = s;
	return 0;
}

/* A millisecond value: *ret stays when unset. */
static int
get_ms(struct cfg_parse *cp, int idx, const char *key, unsigned *ret)
{
	const struct conf_val *v = fixed_val(cp, idx, key);
	uint64_t n;

	if (v == NULL || v->str == NULL)
		return 0;
	if (conf_parse_uint(v->str, MS_MIN, MS_MAX, &n) != 0)
		return conf_errors_addf(cp->errs,
		    "%s:%d: [%s] %s: '%s' is "
		    "not a duration; write a whole number of milliseconds "
		    "from %d to %d, in decimal digits (default %u)",
		    cp->path, v->line, fixed_secs[idx].name, key, v->str,
		    MS_MIN, MS_MAX, *ret);
	*ret = (unsigned)n;
	return 0;
}

/* [limits] websocket_max_message_bytes: a whole number of bytes from
 * CONF_WS_MESSAGE_MIN to CONF_WS_MESSAGE_MAX. */
static int
get_ws_message(struct cfg_parse *cp, size_t *ret)
{
	const struct conf_val *v = fixed_val(cp, SEC_LIMITS,
	    "websocket_max_message_bytes");
	uint64_t n;

	if (v == NULL || v->str == NULL)
		return 0;
	if (conf_parse_uint(v->str, CONF_WS_MESSAGE_MIN, CONF_WS_MESSAGE_MAX,
		&n) != 0)
		return conf_errors_addf(cp->errs,
		    "%s:%d: [limits] websocket_max_message_bytes: '%s' is "
		    "not a size; write a whole number of bytes from %d to "
		    "%d, in decimal digits (default %d)",
		    cp->path, v->line, v->str, CONF_WS_MESSAGE_MIN,
		    CONF_WS_MESSAGE_MAX, CONF_WS_MESSAGE_DEFAULT);
	*ret = (size_t)n;
	return 0;
}

/* [broker] busy_poll_us and adaptive_poll_us: 0 (off) to
 * CONF_BUSY_POLL_MAX_US microseconds; def when absent. */
static int
get_spin(struct cfg_parse *cp, const char *key, unsigned def, unsigned *ret)
{
	const struct conf_val *v = fixed_val(cp, SEC_BROKER, key);
	uint64_t n;

	*ret = def;
	if (v == NULL || v->str == NULL)
		return 0;
	if (conf_parse_uint(v->str, 0, CONF_BUSY_POLL_MAX_US, &n) != 0)
		return conf_errors_addf(cp->errs,
		    "%s:%d: [broker] %s: '%s' is not a spin time; write a "
		    "whole number of microseconds from 0 (off) to %d, in "
		    "decimal digits (default %u)",
		    cp->path, v->line, key, v->str, CONF_BUSY_POLL_MAX_US,
		    def);
	*ret = (unsigned)n;
	return 0;
}

/*
 * [broker] memory_max: a size in bytes, with an optional K, M or G
 * (powers of 1024), from CONF_MEMORY_MIN to CONF_MEMORY_MAX; 0 when the
 * key is absent (the broker derives the default from the machine).
 */
static int
get_memory_max(struct cfg_parse *cp, uint64_t *ret)
{
	const struct conf_val *v = fixed_val(cp, SEC_BROKER, "memory_max");
	char digits[32];
	uint64_t n, mul = 1;
	size_t len;

	*ret = 0;
	if (v == NULL || v->str == NULL)
		return 0;
	len = strlen(v->str);
	if (len > 0 && len < sizeof(digits)) {
		switch (v->str[len - 1]) {
		case 'K':
			mul = 1024;
			break;
		case 'M':
			mul = 1024 * 1024;
			break;
		case 'G':
			mul = 1024 * 1024 * 1024;
			break;
		}
		memcpy(digits, v->str, len + 1);
		if (mul != 1)
			digits[len - 1] = '\0';
	}
	if (len == 0 || len >= sizeof(digits) ||
	    conf_parse_uint(digits, 1, CONF_MEMORY_MAX / mul, &n) != 0 ||
	    n * mul < CONF_MEMORY_MIN)
		return conf_errors_addf(cp->errs,
		    "%s:%d: [broker] "
		    "memory_max: '%s' is not a size; write bytes, or a number "
		    "followed by K, M or G, from 16M to 64G",
		    cp->path, v->line, v->str);
	*ret = n * mul;
	return 0;
}

/* A list of numeric ids. */
static int
get_ids(struct cfg_parse *cp, int idx, const char *key, unsigned **ret,
    size_t *retn)
{
	const struct conf_val *v = fixed_val(cp, idx, key);
	unsigned *ids;
	uint64_t n;
	size_t i;
	int bad = 0;

	if (v == NULL)
		return 0;
	if ((ids = calloc(v->list.n ? v->list.n : 1, sizeof(*ids))) == NULL) {
		cp->nomem = 1;
		return EGRESS_ERR_NOMEM;
	}
	for (i = 0; i < v->list.n; i++) {
		if (conf_parse_uint(v->list.v[i].s, 0, CONF_ID_MAX, &n) != 0) {
			conf_errors_addf(cp->errs,
			    "%s:%d: [%s] %s: '%s' is "
			    "not a numeric id; write decimal ids from 0 to "
			    "%u (names are not looked up here)",
			    cp->path, v->list.v[i].line, fixed_secs[idx].name,
			    key, v->list.v[i].s, CONF_ID_MAX);
			bad = 1;
			continue;
		}
		ids[i] = (unsigned)n;
	}
	if (bad) {
		free(ids);
		return EGRESS_ERR_INVALID;
	}
	free(*ret);
	*ret = ids;
	*retn = v->list.n;
	return 0;
}

/* [metrics] listen: NULL (no scrape endpoint) unless set. */
static void
get_metrics_listen(struct cfg_parse *cp, struct conf_snapshot *s)
{
	const struct conf_val *v = fixed_val(cp, SEC_METRICS, "listen");
	const char *why = NULL;

	if (v == NULL || v->str == NULL || v->str[0] == '\0')
		return;
	if (!conf_listen_is_valid(v->str, &why)) {
		conf_errors_addf(cp->errs, "%s:%d: [metrics] listen: '%s': %s",
		    cp->path, v->line, v->str, why);
		return;
	}
	if ((s->metrics_listen = strdup(v->str)) == NULL)
		cp->nomem = 1;
}

/* ---- Sections ---------------------------------------------------------- */

static void
build_security(struct cfg_parse *cp, struct conf_snapshot *s)
{
	const struct conf_val *v = fixed_val(cp, SEC_SECURITY,
	    "nat64_prefixes");
	struct policy_nat64_list one;
	struct policy_err err;
	const char **items;
	size_t i;
	int bad = 0;

	if (v == NULL || v->list.n == 0)
		return;
	if ((items = calloc(v->list.n, sizeof(*items))) == NULL) {
		cp->nomem = 1;
		return;
	}
	/* Each item alone first, so that every bad one is named with its
	 * line; then the whole list, which refuses the file as a whole. */
	for (i = 0; i < v->list.n; i++) {
		items[i] = v->list.v[i].s;
		memset(&err, 0, sizeof(err));
		if (policy_nat64_parse_list(&items[i], 1, &one, &err) != 0) {
			conf_errors_addf(cp->errs,
			    "%s:%d: [security] "
			    "nat64_prefixes: '%s': %s (one bad prefix rejects "
			    "the whole list)",
			    cp->path, v->list.v[i].line, items[i],
			    err.msg[0] ? err.msg :
					 "not an <ipv6>/<len> prefix");
			bad = 1;
		}
	}
	if (!bad) {
		memset(&err, 0, sizeof(err));
		if (policy_nat64_parse_list(items, v->list.n, &s->nat64,
			&err) != 0)
			conf_errors_addf(cp->errs,
			    "%s:%d: [security] "
			    "nat64_prefixes: %s",
			    cp->path, v->line,
			    err.msg[0] ? err.msg : "invalid list");
	}
	free(items);
}

static void
build_plugins(struct cfg_parse *cp, struct conf_snapshot *s)
{
	const struct conf_val *v;
	uint64_t n;
	size_t i;

	if ((s->package_dir = resolve_path(cp->dir, "packages")) == NULL) {
		cp->nomem = 1;
		return;
	}
	(void)get_path(cp, SEC_PLUGINS, "package_dir", &s->package_dir);

	s->sig_mode = DEF_SIG_MODE;
	if ((v = fixed_val(cp, SEC_PLUGINS_SECURITY, "signature_mode")) !=
		NULL &&
	    v->str != NULL) {
		if (strcmp(v->str, "disabled") == 0)
			s->sig_mode = CONF_SIG_DISABLED;
		else if (strcmp(v->str, "permissive") == 0)
			s->sig_mode = CONF_SIG_PERMISSIVE;
		else if (strcmp(v->str, "strict") == 0)
			s->sig_mode = CONF_SIG_STRICT;
		else
			conf_errors_addf(cp->errs,
			    "%s:%d: [plugins.security] "
			    "signature_mode: unknown mode '%s'; write "
			    "disabled, permissive or strict",
			    cp->path, v->line, v->str);
	}
	if ((v = fixed_val(cp, SEC_PLUGINS_SECURITY, "trusted_keys")) !=
		NULL &&
	    v->list.n > 0) {
		s->trusted_keys = calloc(v->list.n, sizeof(*s->trusted_keys));
		if (s->trusted_keys == NULL) {
			cp->nomem = 1;
			return;
		}
		for (i = 0; i < v->list.n; i++) {
			s->trusted_keys[i] = resolve_path(cp->dir,
			    v->list.v[i].s);
			if (s->trusted_keys[i] == NULL) {
				cp->nomem = 1;
				return;
			}
			s->ntrusted_keys++;
		}
	}

	s->max_connections_per_instance = DEF_MAX_CONN;
	if ((v = fixed_val(cp, SEC_PLUGINS_LIMITS,
		 "max_connections_per_instance")) != NULL &&
	    v->str != NULL) {
		if (strcmp(v->str, "0") == 0)
			conf_errors_addf(cp->errs,
			    "%s:%d: [plugins.limits] "
			    "max_connections_per_instance: 0 would refuse "
			    "every connection; write a number from 1 to %d "
			    "(default %d)",
			    cp->path, v->line, CONN_MAX, DEF_MAX_CONN);
		else if (conf_parse_uint(v->str, 1, CONN_MAX, &n) != 0)
			conf_errors_addf(cp->errs,
			    "%s:%d: [plugins.limits] "
			    "max_connections_per_instance: '%s' is not a "
			    "count; write a decimal number from 1 to %d "
			    "(default %d)",
			    cp->path, v->line, v->str, CONN_MAX, DEF_MAX_CONN);
		else
			s->max_connections_per_instance = (unsigned)n;
	}
}

/* Load the keys one file at a time to name the line of a bad one, then
 * all of them into the snapshot's keyring. */
static void
build_keyring(struct cfg_parse *cp, struct conf_snapshot *s)
{
	const struct conf_val *v = fixed_val(cp, SEC_PLUGINS_SECURITY,
	    "trusted_keys");
	struct conf_keyring *k = NULL;
	struct conf_errors e = { 0 };
	const char *p;
	size_t i, j;
	int bad = 0, r;

	for (i = 0; i < s->ntrusted_keys; i++) {
		p = s->trusted_keys[i];
		r = conf_keyring_load(&p, 1, &k, &e);
		conf_keyring_free(k);
		k = NULL;
		if (r == EGRESS_ERR_NOMEM) {
			cp->nomem = 1;
			break;
		}
		for (j = 0; j < e.n; j++)
			conf_errors_addf(cp->errs,
			    "%s:%d: [plugins.security] "
			    "trusted_keys: %s",
			    cp->path, v->list.v[i].line, e.msgs[j]);
		bad |= e.n > 0;
		conf_errors_done(&e);
	}
	if (bad || cp->nomem)
		return;
	r = conf_keyring_load((const char *const *)s->trusted_keys,
	    s->ntrusted_keys, &s->keyring, &e);
	if (r == EGRESS_ERR_NOMEM)
		cp->nomem = 1;
	else if (r != 0)
		for (j = 0; j < e.n; j++)
			conf_errors_addf(cp->errs,
			    "%s: [plugins.security] "
			    "trusted_keys: %s",
			    cp->path, e.msgs[j]);
	conf_errors_done(&e);
}

/* [limits] extra_methods: methods a guest may use beyond the standard
 * set. CONNECT is never one of them. */
static void
get_methods(struct cfg_parse *cp, struct conf_snapshot *s)
{
	const struct conf_val *v;
	size_t i;
	int bad = 0;

	if ((v = fixed_val(cp, SEC_LIMITS, "extra_methods")) == NULL ||
	    v->list.n == 0)
		return;
	if (v->list.n > CONF_METHODS_MAX) {
		conf_errors_addf(cp->errs,
		    "%s:%d: [limits] extra_methods: "
		    "%zu methods; at most %d",
		    cp->path, v->line, v->list.n, CONF_METHODS_MAX);
		return;
	}
	for (i = 0; i < v->list.n; i++) {
		const char *m = v->list.v[i].s;

		if (strcasecmp(m, "CONNECT") == 0) {
			conf_errors_addf(cp->errs,
			    "%s:%d: [limits] "
			    "extra_methods: 'CONNECT' is never relayed",
			    cp->path, v->list.v[i].line);
			bad = 1;
		} else if (!conf_method_is_valid(m)) {
			conf_errors_addf(cp->errs,
			    "%s:%d: [limits] "
			    "extra_methods: '%s': a method is 1 to %d upper-case "
			    "letters, digits or '-'",
			    cp->path, v->list.v[i].line, m, CONF_METHOD_MAX);
			bad = 1;
		}
	}
	if (bad)
		return;
	if ((s->extra_methods = calloc(v->list.n,
		 sizeof(*s->extra_methods))) == NULL) {
		cp->nomem = 1;
		return;
	}
	for (i = 0; i < v->list.n; i++) {
		if ((s->extra_methods[i] = strdup(v->list.v[i].s)) == NULL) {
			cp->nomem = 1;
			return;
		}
		s->nextra_methods++;
	}
}

static void
build_broker(struct cfg_parse *cp, struct conf_snapshot *s)
{
	const struct conf_val *v;
	const char *why;
	size_t i;
	int bad = 0;

	if ((s->instance_socket_dir = strdup(DEF_SOCKET_DIR)) == NULL ||
	    (s->control_socket = strdup(DEF_CONTROL_SOCKET)) == NULL) {
		cp->nomem = 1;
		return;
	}
	(void)get_path(cp, SEC_BROKER, "instance_socket_dir",
	    &s->instance_socket_dir);
	if (get_path(cp, SEC_BROKER, "control_socket", &s->control_socket) ==
		0 &&
	    strlen(s->control_socket) >=
		sizeof(((struct sockaddr_un *)0)->sun_path) &&
	    (v = fixed_val(cp, SEC_BROKER, "control_socket")))
		conf_errors_addf(cp->errs,
		    "%s:%d: [broker] control_socket: "
		    "'%s' is longer than a Unix socket path may be (%zu "
		    "bytes)",
		    cp->path, v->line, s->control_socket,
		    sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
	(void)get_path(cp, SEC_BROKER, "log", &s->log_path);
	s->drain_timeout_ms = DEF_DRAIN_MS;
	(void)get_ms(cp, SEC_BROKER, "drain_timeout_ms", &s->drain_timeout_ms);
	(void)get_spin(cp, "busy_poll_us", 0, &s->busy_poll_us);
	(void)get_spin(cp, "adaptive_poll_us", CONF_ADAPTIVE_POLL_US,
	    &s->adaptive_poll_us);
	(void)get_memory_max(cp, &s->memory_max);

	/* Root only, unless the operator lists the peers. */
	if ((s->control_uids = calloc(1, sizeof(*s->control_uids))) == NULL) {
		cp->nomem = 1;
		return;
	}
	s->control_uids[0] = 0;
	s->ncontrol_uids = 1;
	(void)get_ids(cp, SEC_BROKER, "control_uids",
	    (unsigned **)&s->control_uids, &s->ncontrol_uids);
	(void)get_ids(cp, SEC_BROKER, "control_gids",
	    (unsigned **)&s->control_gids, &s->ncontrol_gids);

	s->resolver_timeout_ms = DEF_RESOLVER_MS;
	(void)get_ms(cp, SEC_RESOLVER, "timeout_ms", &s->resolver_timeout_ms);
	if ((v = fixed_val(cp, SEC_RESOLVER, "servers")) != NULL &&
	    v->list.n > 0) {
		if (v->list.n > RESOLVER_SERVERS_MAX) {
			conf_errors_addf(cp->errs,
			    "%s:%d: [resolver] servers: "
			    "%zu servers; at most %d",
			    cp->path, v->line, v->list.n,
			    RESOLVER_SERVERS_MAX);
			return;
		}
		for (i = 0; i < v->list.n; i++) {
			if (conf_server_is_valid(v->list.v[i].s, &why))
				continue;
			conf_errors_addf(cp->errs,
			    "%s:%d: [resolver] servers: "
			    "'%s': %s; write ADDR, ADDR:PORT, [ADDR] or "
			    "[ADDR]:PORT",
			    cp->path, v->list.v[i].line, v->list.v[i].s, why);
			bad = 1;
		}
		if (bad)
			return;
		s->resolver_servers = calloc(v->list.n,
		    sizeof(*s->resolver_servers));
		if (s->resolver_servers == NULL) {
			cp->nomem = 1;
			return;
		}
		for (i = 0; i < v->list.n; i++) {
			s->resolver_servers[i] = strdup(v->list.v[i].s);
			if (s->resolver_servers[i] == NULL) {
				cp->nomem = 1;
				return;
			}
			s->nresolver_servers++;
		}
	}

	s->connect_timeout_ms = DEF_CONNECT_MS;
	s->first_byte_timeout_ms = DEF_FIRST_BYTE_MS;
	s->between_bytes_timeout_ms = DEF_BETWEEN_BYTES_MS;
	(void)get_ms(cp, SEC_LIMITS, "connect_timeout_ms",
	    &s->connect_timeout_ms);
	(void)get_ms(cp, SEC_LIMITS, "first_byte_timeout_ms",
	    &s->first_byte_timeout_ms);
	(void)get_ms(cp, SEC_LIMITS, "between_bytes_timeout_ms",
	    &s->between_bytes_timeout_ms);
	s->stream_idle_timeout_ms = DEF_STREAM_IDLE_MS;
	s->stream_max_lifetime_ms = DEF_STREAM_LIFE_MS;
	(void)get_ms(cp, SEC_LIMITS, "stream_idle_timeout_ms",
	    &s->stream_idle_timeout_ms);
	(void)get_ms(cp, SEC_LIMITS, "stream_max_lifetime_ms",
	    &s->stream_max_lifetime_ms);
	s->websocket_max_message_bytes = CONF_WS_MESSAGE_DEFAULT;
	(void)get_ws_message(cp, &s->websocket_max_message_bytes);
	get_methods(cp, s);
	(void)get_path(cp, SEC_TLS, "ca_file", &s->ca_file);
	get_metrics_listen(cp, s);
	if (conf_upstream_proxy(cp->path, cp->dir,
		fixed_val(cp, SEC_UPSTREAM_PROXY, "url"),
		fixed_val(cp, SEC_UPSTREAM_PROXY, "credentials_file"), s,
		cp->errs) != 0)
		cp->nomem = 1;
}

/* Every item of the carve-out key must be covered by egress_hosts. */
static void
check_carve_outs(struct cfg_parse *cp, const struct conf_sec *sec,
    const struct conf_instance *ci, const char *key)
{
	const struct conf_val *v = conf_sec_cval(sec, key);
	struct policy_entry e;
	struct policy_err err;
	size_t i;

	for (i = 0; i < v->list.n; i++) {
		const char *item = v->list.v[i].s;

		if (policy_entry_parse(item, strlen(item),
			conf_psl_is_public_suffix, NULL, &e, &err) != 0)
			continue; /* already reported */
		if (policy_grant_covers(ci->hosts, &e))
			continue;
		conf_errors_addf(cp->errs,
		    "%s:%d: [%s] %s: "
		    "'%s' is not covered by egress_hosts; a carve-out only "
		    "relaxes the address class of a granted host, so add "
		    "'%s' to egress_hosts or remove it here",
		    cp->path, v->list.v[i].line, sec->name, key, item, item);
	}
}

static int files_push(struct conf_snapshot *s, struct conf_file_id *id,
    int shared, size_t *idx);

/*
 * A token or TLS profile file: its identity is taken before the file is
 * checked (a rewrite in between only makes the snapshot stale at once),
 * so that rewriting it applies at the next request like any other edit.
 */
int
conf_track_file(struct conf_snapshot *s, const char *path, size_t max)
{
	struct conf_file_id id = { 0 };
	char *buf = NULL;
	size_t len = 0;

	if ((id.path = strdup(path)) == NULL)
		return EGRESS_ERR_NOMEM;
	if (conf_read_file(path, max, &buf, &len, &id) != 0) {
		/* Unreadable: the caller's check says why; the identity is
		 * the stat one, or none (changed at the next check). */
		(void)conf_file_id_stat(path, &id);
	}
	if (buf != NULL) {
		explicit_bzero(buf, len);
		free(buf);
	}
	if (id.path == NULL || files_push(s, &id, 1, NULL) != 0) {
		free(id.path);
		return EGRESS_ERR_NOMEM;
	}
	return 0;
}

/* An entry's own stream limit, overriding [limits] for its instance:
 * *ret stays 0 when unset. */
static void
get_entry_ms(struct cfg_parse *cp, const struct conf_sec *sec, const char *key,
    unsigned *ret)
{
	const struct conf_val *v = conf_sec_cval(sec, key);
	uint64_t n;

	if (v->str == NULL)
		return;
	if (conf_parse_uint(v->str, MS_MIN, MS_MAX, &n) != 0) {
		conf_errors_addf(cp->errs,
		    "%s:%d: [%s] %s: '%s' is not a duration; write a whole "
		    "number of milliseconds from %d to %d, in decimal "
		    "digits (unset: [limits] %s)",
		    cp->path, v->line, sec->name, key, v->str, MS_MIN, MS_MAX,
		    key);
		return;
	}
	*ret = (unsigned)n;
}

/* proxy_listen and proxy_token_file of an entry. */
static void
build_entry_proxy(struct cfg_parse *cp, struct conf_snapshot *s,
    const struct conf_sec *sec, struct conf_instance *ci)
{
	const struct conf_val *l = conf_sec_cval(sec, "proxy_listen");
	const struct conf_val *t = conf_sec_cval(sec, "proxy_token_file");
	const char *why = NULL;
	char *path;

	if (l->str == NULL || l->str[0] == '\0') {
		if (t->str != NULL && t->str[0] != '\0')
			conf_errors_addf(cp->errs,
			    "%s:%d: [%s] proxy_token_file: set without "
			    "proxy_listen",
			    cp->path, t->line, sec->name);
		return;
	}
	if (l->str[0] == '/' || !conf_listen_is_valid(l->str, &why)) {
		conf_errors_addf(cp->errs,
		    "%s:%d: [%s] proxy_listen: '%s': %s", cp->path, l->line,
		    sec->name, l->str,
		    l->str[0] == '/' ? "write 127.0.0.1:PORT or [::1]:PORT; "
				       "only loopback is served" :
				       why);
		return;
	}
	if (t->str == NULL || t->str[0] == '\0') {
		conf_errors_addf(cp->errs,
		    "%s:%d: [%s] proxy_token_file: missing; proxy_listen "
		    "needs a token file (mode 0600)",
		    cp->path, l->line, sec->name);
		return;
	}
	if ((path = resolve_path(cp->dir, t->str)) == NULL) {
		cp->nomem = 1;
		return;
	}
	if (conf_track_file(s, path, CONF_TOKEN_MAX + 2) != 0)
		cp->nomem = 1;
	else if ((ci->proxy_token = conf_token_read(path, &why)) == NULL)
		conf_errors_addf(cp->errs,
		    "%s:%d: [%s] proxy_token_file: %s %s", cp->path, t->line,
		    sec->name, path, why);
	else if ((ci->proxy_listen = strdup(l->str)) == NULL)
		cp->nomem = 1;
	free(path);
}

/* Two entries may not serve their proxy front on the same address. */
static void
check_proxy_listen(struct cfg_parse *cp, const struct conf_snapshot *s)
{
	size_t i, j;

	for (i = 0; i < s->ninstances; i++)
		for (j = 0; j < i; j++)
			if (s->instances[i].proxy_listen != NULL &&
			    s->instances[j].proxy_listen != NULL &&
			    strcmp(s->instances[i].proxy_listen,
				s->instances[j].proxy_listen) == 0)
				conf_errors_addf(cp->errs,
				    "%s:%d: [plugins.entries.%s] "
				    "proxy_listen: %s is already the proxy "
				    "address of [plugins.entries.%s]",
				    cp->path, s->instances[i].line,
				    s->instances[i].name,
				    s->instances[i].proxy_listen,
				    s->instances[j].name);
}

static void
build_entry(struct cfg_parse *cp, struct conf_snapshot *s,
    const struct conf_sec *sec, struct conf_instance *ci)
{
	const struct conf_val *v;
	size_t sunlen = sizeof(((struct sockaddr_un *)0)->sun_path);
	int ok_hosts, ok_private, r;

	ci->line = sec->line;
	if ((ci->name = strdup(sec->name + strlen(ENTRIES_PREFIX))) == NULL) {
		cp->nomem = 1;
		return;
	}
	v = conf_sec_cval(sec, "plugin");
	if (v->line == 0)
		conf_errors_addf(cp->errs,
		    "%s:%d: [%s] plugin: missing; add "
		    "'plugin = NAME' (the [plugin] name of its manifest)",
		    cp->path, sec->line, sec->name);
	else if (v->str != NULL && !conf_name_is_valid(v->str, 0))
		conf_errors_addf(cp->errs,
		    "%s:%d: [%s] plugin: '%s' is not a "
		    "plugin name: 1 to %d bytes of a-z, 0-9, '.', '_', '-', "
		    "starting with a letter or digit, without '..'",
		    cp->path, v->line, sec->name, v->str, CONF_NAME_MAX);
	else if (v->str != NULL && (ci->plugin = strdup(v->str)) == NULL)
		cp->nomem = 1;

	v = conf_sec_cval(sec, "manifest");
	if (v->line == 0)
		conf_errors_addf(cp->errs,
		    "%s:%d: [%s] manifest: missing; add "
		    "'manifest = packages/NAME/manifest.ini' (relative to "
		    "this file's folder)",
		    cp->path, sec->line, sec->name);
	else if (v->str != NULL &&
	    (ci->manifest_path = resolve_path(cp->dir, v->str)) == NULL)
		cp->nomem = 1;

	v = conf_sec_cval(sec, "permissions");
	(void)conf_permissions_parse(cp->path, sec->name, &v->list,
	    &ci->granted_permissions, cp->errs);

	v = conf_sec_cval(sec, "egress_hosts");
	r = conf_grant_parse(cp->path, sec->name, "egress_hosts", &v->list,
	    &ci->hosts, cp->errs);
	if (r == EGRESS_ERR_NOMEM)
		cp->nomem = 1;
	ok_hosts = r == 0;
	v = conf_sec_cval(sec, "egress_allow_private");
	r = conf_grant_parse(cp->path, sec->name, "egress_allow_private",
	    &v->list, &ci->allow_private, cp->errs);
	if (r == EGRESS_ERR_NOMEM)
		cp->nomem = 1;
	ok_private = r == 0;
	if (ok_hosts && ok_private)
		check_carve_outs(cp, sec, ci, "egress_allow_private");
	v = conf_sec_cval(sec, "egress_allow_loopback");
	r = conf_grant_parse(cp->path, sec->name, "egress_allow_loopback",
	    &v->list, &ci->allow_loopback, cp->errs);
	if (r == EGRESS_ERR_NOMEM)
		cp->nomem = 1;
	if (ok_hosts && r == 0)
		check_carve_outs(cp, sec, ci, "egress_allow_loopback");

	v = conf_sec_cval(sec, "socket_owner");
	if (v->str != NULL && !conf_owner_is_valid(v->str))
		conf_errors_addf(cp->errs,
		    "%s:%d: [%s] socket_owner: '%s' is "
		    "not a user name or numeric uid",
		    cp->path, v->line, sec->name, v->str);
	else if (v->str != NULL && (ci->socket_owner = strdup(v->str)) == NULL)
		cp->nomem = 1;
	v = conf_sec_cval(sec, "socket_group");
	if (v->str != NULL && !conf_owner_is_valid(v->str))
		conf_errors_addf(cp->errs,
		    "%s:%d: [%s] socket_group: '%s' is "
		    "not a group name or numeric gid",
		    cp->path, v->line, sec->name, v->str);
	else if (v->str != NULL && (ci->socket_group = strdup(v->str)) == NULL)
		cp->nomem = 1;

	build_entry_proxy(cp, s, sec, ci);
	get_entry_ms(cp, sec, "stream_idle_timeout_ms",
	    &ci->stream_idle_timeout_ms);
	get_entry_ms(cp, sec, "stream_max_lifetime_ms",
	    &ci->stream_max_lifetime_ms);
	v = conf_sec_cval(sec, "tls_profiles");
	if (conf_tls_profiles_entry(cp->path, sec->name, &v->list, s, ci,
		cp->errs) != 0)
		cp->nomem = 1;
	conf_inspect_entry(cp->path, sec->name,
	    conf_sec_cval(sec, "tls_inspect"), ci, cp->errs);

	/* DIR/NAME.sock must fit a Unix socket address. */
	if (s->instance_socket_dir != NULL &&
	    strlen(s->instance_socket_dir) + 1 + strlen(ci->name) +
		    strlen(".sock") >=
		sunlen)
		conf_errors_addf(cp->errs,
		    "%s:%d: [%s]: the socket path "
		    "%s/%s.sock is longer than a Unix socket path may be "
		    "(%zu bytes); shorten the name or "
		    "[broker] instance_socket_dir",
		    cp->path, sec->line, sec->name, s->instance_socket_dir,
		    ci->name, sunlen - 1);
}

static int
instance_cmp(const void *a, const void *b)
{
	const struct conf_instance *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/* Record a file (once per path; a file recorded as shared stays shared)
 * and write its index to *idx when idx is not NULL. */
static int
files_push(struct conf_snapshot *s, struct conf_file_id *id, int shared,
    size_t *idx)
{
	struct conf_file_id *v;
	size_t i;

	for (i = 0; i < s->nfiles; i++) {
		if (strcmp(s->files[i].path, id->path) == 0) {
			free(id->path);
			id->path = NULL;
			if (shared)
				s->files[i].shared = 1;
			if (idx != NULL)
				*idx = i;
			return 0;
		}
	}
	if ((v = realloc(s->files, (s->nfiles + 1) * sizeof(*v))) == NULL)
		return EGRESS_ERR_NOMEM;
	s->files = v;
	id->shared = shared;
	if (idx != NULL)
		*idx = s->nfiles;
#ifndef __clang__ /* gcc 12 -fanalyzer loses the block stored in s->files */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
#endif
	s->files[s->nfiles++] = *id;
	id->path = NULL;
#ifndef __clang__
#pragma GCC diagnostic pop
#endif
	return 0;
}

/* Load the instance's manifest and build its policy view. */
static int
load_manifest(struct conf_snapshot *s, struct conf_instance *ci)
{
	struct conf_errors e = { 0 };
	struct conf_file_id ids[2];
	struct conf_manifest *m = NULL;
	int r, rc = 0;

	ci->file_idx[0] = ci->file_idx[1] = SIZE_MAX; /* not recorded */
	r = conf_manifest_load_ids(ci->manifest_path, s->sig_mode, s->keyring,
	    &m, &e, ids);
	if (r == EGRESS_ERR_NOMEM) {
		rc = r;
		goto out;
	}
	if (r == 0 && strcmp(m->name, ci->plugin) != 0) {
		conf_errors_addf(&e,
		    "%s:%d: [plugin] name: '%s' is not the "
		    "entry's plugin '%s' (%s:%d); this manifest is refused "
		    "for instance '%s'",
		    m->path, m->name_line, m->name, ci->plugin, s->path,
		    ci->line, ci->name);
		conf_manifest_free(m);
		m = NULL;
	}
	if (m == NULL && (ci->manifest_error = conf_errors_join(&e)) == NULL)
		rc = EGRESS_ERR_NOMEM;
	ci->manifest = m;
	if (rc == 0 &&
	    ((rc = files_push(s, &ids[0], 0, &ci->file_idx[0])) != 0 ||
		(rc = files_push(s, &ids[1], 0, &ci->file_idx[1])) != 0))
		goto out;
out:
	free(ids[0].path);
	free(ids[1].path);
	conf_errors_done(&e);
	return rc;
}

static void
set_policy_view(struct conf_instance *ci)
{
	struct policy_instance *p = &ci->policy;

	memset(p, 0, sizeof(*p));
	p->name = ci->name;
	p->hosts = ci->hosts;
	p->allow_private = ci->allow_private;
	p->allow_loopback = ci->allow_loopback;
	if (ci->manifest == NULL) {
		/* Refused: nothing but the refusal is consulted, and even
		 * so there is no permission and no declaration. */
		p->manifest_ok = 0;
		return;
	}
	p->manifest_ok = 1;
	p->permissions = ci->manifest->permissions & ci->granted_permissions;
	p->declared = ci->manifest->hosts;
	p->operator_defined = ci->manifest->operator_defined;
}

static char *
dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char cwd[PATH_MAX], *dir, *abs;

	if (slash == NULL)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else
		dir = strndup(path, (size_t)(slash - path));
	if (dir == NULL || dir[0] == '/')
		return dir;
	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		/* Keep it relative; paths then resolve against the cwd. */
		return dir;
	}
	if (strcmp(dir, ".") == 0)
		abs = strdup(cwd);
	else if (asprintf(&abs, "%s/%s", cwd, dir) < 0)
		abs = NULL;
	free(dir);
	return abs;
}

static int
load_buffer(const char *path, const char *buf, size_t len,
    struct conf_file_id *self, struct conf_snapshot **ret,
    struct conf_errors *reterr)
{
	struct cfg_parse cp;
	struct conf_snapshot *s = NULL;
	struct conf_errors errs = { 0 };
	size_t i;
	int r, rc = EGRESS_ERR_INVALID;

	memset(&cp, 0, sizeof(cp));
	cp.path = path;
	cp.errs = &errs;
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->path = strdup(path)) == NULL ||
	    (s->dir = dir_of(path)) == NULL) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	cp.dir = s->dir;
	if (self != NULL) {
		/* Absolute, so that a later chdir cannot break the check. */
		const char *base = strrchr(path, '/');

		if (path[0] == '/')
			self->path = strdup(path);
		else if (asprintf(&self->path, "%s/%s", s->dir,
			     base != NULL ? base + 1 : path) < 0)
			self->path = NULL;
		if (self->path == NULL) {
			rc = EGRESS_ERR_NOMEM;
			goto out;
		}
		if ((rc = files_push(s, self, 1, NULL)) != 0)
			goto out;
		rc = EGRESS_ERR_INVALID;
	}

	r = conf_ini_parse(path, buf, len, cfg_section, &cp, &errs);
	if (r == EGRESS_ERR_NOMEM || cp.nomem) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	build_security(&cp, s);
	build_plugins(&cp, s);
	build_broker(&cp, s);
	if (conf_tls_profiles_build(path, s->dir, cp.profiles, cp.nprofiles, s,
		&errs) != 0)
		cp.nomem = 1;
	if (cp.nomem) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	if (cp.nentries > 0) {
		s->instances = calloc(cp.nentries, sizeof(*s->instances));
		if (s->instances == NULL) {
			rc = EGRESS_ERR_NOMEM;
			goto out;
		}
		for (i = 0; i < cp.nentries; i++) {
			build_entry(&cp, s, cp.entries[i], &s->instances[i]);
			s->ninstances++;
			if (cp.nomem) {
				rc = EGRESS_ERR_NOMEM;
				goto out;
			}
		}
	}
	check_proxy_listen(&cp, s);
	if (conf_inspect_build(path, s->dir,
		fixed_val(&cp, SEC_TLS, "inspect_ca_cert"),
		fixed_val(&cp, SEC_TLS, "inspect_ca_key"), s, &errs) != 0)
		cp.nomem = 1;
	build_keyring(&cp, s);
	if (cp.nomem) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	if (errs.n > 0)
		goto out;

	if (s->ninstances > 1)
		qsort(s->instances, s->ninstances, sizeof(*s->instances),
		    instance_cmp);
	for (i = 0; i < s->ninstances; i++) {
		if ((rc = load_manifest(s, &s->instances[i])) != 0)
			goto out;
		set_policy_view(&s->instances[i]);
	}
	for (i = 0; i < conf_keyring_nfiles(s->keyring); i++) {
		struct conf_file_id id = *conf_keyring_file(s->keyring, i);

		if ((id.path = strdup(id.path)) == NULL ||
		    files_push(s, &id, 1, NULL) != 0) {
			free(id.path);
			rc = EGRESS_ERR_NOMEM;
			goto out;
		}
	}
	*ret = s;
	s = NULL;
	rc = 0;
out:
	if (rc == EGRESS_ERR_NOMEM)
		conf_errors_addf(&errs, "%s: out of memory", path);
	conf_errors_move(reterr, &errs);
	cfg_parse_done(&cp);
	conf_snapshot_free(s);
	return rc;
}

int
conf_load_buffer(const char *path, const char *buf, size_t len,
    struct conf_snapshot **ret, struct conf_errors *reterr)
{
	return load_buffer(path, buf, len, NULL, ret, reterr);
}

/* The message of a configuration file that cannot be read (errno). */
static void
conf_read_error(const char *path, struct conf_errors *reterr)
{
	if (errno == EISDIR)
		conf_errors_addf(reterr,
		    "%s: cannot read the configuration: "
		    "it is a folder, not a file",
		    path);
	else if (errno == EINVAL)
		conf_errors_addf(reterr,
		    "%s: cannot read the configuration: "
		    "not a regular file",
		    path);
	else
		conf_errors_addf(reterr,
		    "%s: cannot read the configuration: "
		    "%s",
		    path, strerror(errno));
}

/* Read and parse the configuration at path into cp (the caller frees cp
 * with cfg_parse_done(), its dir and *ret_buf), errors in reterr. */
static int
peek_parse(const char *path, struct cfg_parse *cp, char **ret_buf,
    struct conf_errors *reterr)
{
	struct conf_file_id id;
	size_t len = 0;
	int r;

	memset(&id, 0, sizeof(id));
	memset(cp, 0, sizeof(*cp));
	r = conf_read_file(path, CONFIG_FILE_MAX, ret_buf, &len, &id);
	if (r == EGRESS_ERR_NOT_FOUND)
		conf_errors_addf(reterr, "%s: no such configuration file",
		    path);
	else if (r == EGRESS_ERR_TOO_BIG)
		conf_errors_addf(reterr,
		    "%s: the configuration is over %d bytes", path,
		    CONFIG_FILE_MAX);
	else if (r == EGRESS_ERR_IO)
		conf_read_error(path, reterr);
	if (r != 0)
		return r;
	cp->path = path;
	cp->errs = reterr;
	if ((cp->dir = dir_of(path)) == NULL ||
	    conf_ini_parse(path, *ret_buf, len, cfg_section, cp, reterr) ==
		EGRESS_ERR_NOMEM ||
	    cp->nomem)
		return EGRESS_ERR_NOMEM;
	return 0;
}

int
conf_peek_path(const char *path, const char *section, const char *key,
    const char *def, char **ret, int *ret_found, struct conf_errors *reterr)
{
	struct cfg_parse cp;
	char *buf = NULL, *v = NULL;
	int idx, r;

	for (idx = 0; idx < SEC_NFIXED; idx++)
		if (strcmp(fixed_secs[idx].name, section) == 0)
			break;
	if (idx == SEC_NFIXED)
		return EGRESS_ERR_INVALID;
	if ((r = peek_parse(path, &cp, &buf, reterr)) != 0)
		goto out;
	r = EGRESS_ERR_NOMEM;
	if ((def[0] == '/' ? (v = strdup(def)) == NULL :
			     asprintf(&v, "%s/%s", cp.dir, def) < 0) ||
	    /* A value too long to resolve keeps the default (error added). */
	    (r = get_path(&cp, idx, key, &v)) == EGRESS_ERR_NOMEM)
		goto out;
	*ret_found = r == 0 && fixed_val(&cp, idx, key) != NULL;
	r = 0;
	*ret = v;
	v = NULL;
out:
	free(v);
	free((char *)cp.dir);
	cfg_parse_done(&cp);
	free(buf);
	return r;
}

int
conf_peek_control_socket(const char *path, char **ret, int *ret_found,
    struct conf_errors *reterr)
{
	return conf_peek_path(path, "broker", "control_socket",
	    DEF_CONTROL_SOCKET, ret, ret_found, reterr);
}

int
conf_load(const char *path, struct conf_snapshot **ret,
    struct conf_errors *reterr)
{
	struct conf_file_id id;
	char *buf = NULL;
	size_t len = 0;
	int r;

	memset(&id, 0, sizeof(id));
	r = conf_read_file(path, CONFIG_FILE_MAX, &buf, &len, &id);
	if (r == EGRESS_ERR_NOMEM)
		return r;
	if (r == EGRESS_ERR_NOT_FOUND) {
		conf_errors_addf(reterr,
		    "%s: no such configuration file "
		    "(give one with -c FILE or $EGRESSD_CONFIG)",
		    path);
		return EGRESS_ERR_IO;
	}
	if (r == EGRESS_ERR_TOO_BIG) {
		conf_errors_addf(reterr,
		    "%s: the configuration is over %d "
		    "bytes",
		    path, CONFIG_FILE_MAX);
		return EGRESS_ERR_INVALID;
	}
	if (r != 0) {
		conf_read_error(path, reterr);
		return EGRESS_ERR_IO;
	}
	r = load_buffer(path, buf, len, &id, ret, reterr);
	free(id.path);
	free(buf);
	return r;
}
