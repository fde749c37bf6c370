/* SPDX-License-Identifier: ISC */
/*
 * `egressctl diagnose`: everything an operator has to act on, each with
 * the exact command that acts on it: destinations a package declares but
 * the entry does not grant (denied), grants the declaration does not cover
 * (ineffective), permissions requested but not granted, refused manifests,
 * signature problems and configuration warnings. With --log FILE it also
 * summarises the broker's egress.decision denials (JSON lines) per
 * instance, destination and reason. When [resolver] servers is set (or
 * with --nat64, through /etc/resolv.conf) it asks that resolver for
 * ipv4only.arpa AAAA (RFC 7050, bounded by DIAG_NAT64_TIMEOUT_MS) and, if
 * the answers lie in a NAT64 prefix nat64_prefixes does not declare,
 * prints the warning and the nat64_prefixes line to write; --no-nat64
 * skips the lookup. Every logged denial is classified by its reason and
 * checked against the file as it is now: no grant is proposed that the
 * address rules would refuse or that the file already holds. Notes
 * (unsigned under permissive, an empty grant chosen with --egress none,
 * a denial fixed since) do not count. Exit 0 when nothing but notes is
 * listed, 1 otherwise, 2 for a usage error, 3 for a configuration error.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "broker/ctl/ctl.h"
#include "broker/net/nat64disc.h"
#include "broker/net/netaddr.h"
#include "broker/ctl/pkg.h"
#include "conf/conf.h"
#include "policy/policy.h"

#define LOG_LINE_MAX	      (64 * 1024)
#define LOG_KEYS_MAX	      10000 /* distinct (instance, host, reason) */
#define FIELD_MAX	      256
#define DIAG_NAT64_TIMEOUT_MS 3000 /* a diagnose never hangs */

struct finding {
	json_t *items; /* array of objects */
	int n;	       /* findings that ask for action */
	int json;
};

/* Record one finding; command may be NULL. */
static void
add(struct finding *f, const char *instance, const char *kind,
    const char *subject, const char *message, const char *command)
{
	if (strcmp(kind, "note") != 0)
		f->n++;
	if (f->json) {
		json_t *o = json_object();

		json_object_set_new(o, "instance",
		    instance ? json_string(instance) : json_null());
		json_object_set_new(o, "kind", json_string(kind));
		json_object_set_new(o, "subject",
		    subject ? json_string(subject) : json_null());
		json_object_set_new(o, "message", json_string(message));
		json_object_set_new(o, "command",
		    command ? json_string(command) : json_null());
		json_array_append_new(f->items, o);
		return;
	}
	printf("%s%s%s: %s\n", instance ? instance : "configuration",
	    subject ? ": " : "", subject ? subject : "", message);
	if (command != NULL)
		printf("  %s\n", command);
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

static char *
fmt(const char *f, ...)
{
	va_list ap;
	char *s;

	va_start(ap, f);
	if (vasprintf(&s, f, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* The folder of a manifest, relative to the configuration's folder when
 * it lies under it (the commands we print run from there). */
static char *
reldir(const struct conf_snapshot *s, const char *manifest)
{
	size_t n = strlen(s->dir);
	const char *p = manifest;
	char *d, *sl;

	if (strncmp(p, s->dir, n) == 0 && p[n] == '/')
		p += n + 1;
	if ((d = strdup(p)) == NULL)
		return NULL;
	if ((sl = strrchr(d, '/')) != NULL)
		*sl = '\0';
	else
		(void)snprintf(d, strlen(d) + 1, ".");
	return d;
}

static void
diagnose_instance(const struct ctl_ctx *ctx, struct finding *f,
    const struct conf_snapshot *s, const struct conf_instance *ci)
{
	const struct conf_manifest *m = ci->manifest;
	const char *c = ctl_cmd(ctx);
	struct pkg_reach r;
	char q[600], h[600], *msg, *cmd;
	unsigned bit;
	size_t i;

	if (pkg_reach_compute(ci, m, NULL, &r) != 0)
		return;
	ctl_shq(ci->name, q, sizeof(q));
	if (m == NULL) {
		char *dir = reldir(s, ci->manifest_path);

		msg = fmt("manifest refused, so the instance has no "
			  "permissions and no reach: %s",
		    ci->manifest_error ? ci->manifest_error : "?");
		cmd = fmt("%s manifest verify %s", c, dir ? dir : ".");
		add(f, ci->name, "manifest-refused", NULL, msg ? msg : "?",
		    cmd);
		free(msg);
		free(cmd);
		free(dir);
		pkg_reach_done(&r);
		return;
	}
	if (!m->operator_defined && r.granted.n == 0 && r.declared.n > 0) {
		/* An empty grant is a choice (--egress none, or every host
		 * revoked): one note, not a finding per declared host. */
		char *decl = NULL, *p;

		for (i = 0; i < r.declared.n; i++) {
			p = fmt("%s%s%s", decl ? decl : "", decl ? ", " : "",
			    r.declared.v[i]);
			free(decl);
			decl = p;
		}
		msg =
		    fmt("no destination granted (--egress none): %s %s "
			"declares %s; grant one deliberately with the command "
			"below",
			m->name, m->version, decl ? decl : "?");
		cmd = fmt("%s plugin grant %s %s", c, q,
		    ctl_shq(r.declared.v[0], h, sizeof(h)));
		add(f, ci->name, "note", NULL, msg ? msg : "?", cmd);
		free(decl);
		free(msg);
		free(cmd);
	}
	for (i = 0; r.granted.n > 0 && i < r.not_granted.n; i++) {
		msg = fmt("denied: declared by %s %s, not granted", m->name,
		    m->version);
		cmd = fmt("%s plugin grant %s %s", c, q,
		    ctl_shq(r.not_granted.v[i], h, sizeof(h)));
		add(f, ci->name, "not-granted", r.not_granted.v[i],
		    msg ? msg : "?", cmd);
		free(msg);
		free(cmd);
	}
	for (i = 0; i < r.ineffective.n; i++) {
		msg = fmt("ineffective grant: not declared by %s %s", m->name,
		    m->version);
		cmd = fmt("%s plugin revoke %s %s", c, q,
		    ctl_shq(r.ineffective.v[i], h, sizeof(h)));
		add(f, ci->name, "ineffective", r.ineffective.v[i],
		    msg ? msg : "?", cmd);
		free(msg);
		free(cmd);
	}
	if (m->operator_defined && r.granted.n == 0 &&
	    (m->permissions & ci->granted_permissions) != 0) {
		cmd = fmt("%s plugin grant %s HOST", c, q);
		add(f, ci->name, "no-destination", NULL,
		    "no destination "
		    "granted; this package's destinations come from "
		    "instance configuration (operator_defined = true)",
		    cmd);
		free(cmd);
	}
	for (bit = 1; bit <= POLICY_PERM_SOCKET_CLIENT; bit <<= 1) {
		const char *pn = policy_permission_name(bit);

		if (pn == NULL || !(m->permissions & bit) ||
		    (ci->granted_permissions & bit))
			continue;
		msg = fmt("permission requested by %s %s, not granted",
		    m->name, m->version);
		cmd = fmt("%s plugin grant %s --permission %s", c, q, pn);
		add(f, ci->name, "permission", pn, msg ? msg : "?", cmd);
		free(msg);
		free(cmd);
	}
	if (m->sig == CONF_SIG_UNSIGNED) {
		char *dir = reldir(s, ci->manifest_path);

		cmd = fmt("egressctl manifest sign --key KEY %s",
		    dir ? dir : ".");
		add(f, ci->name, "note", NULL,
		    "the package is unsigned "
		    "(accepted under permissive; strict refuses it)",
		    cmd);
		free(cmd);
		free(dir);
	}
	pkg_reach_done(&r);
}

/* ---- The decision log ------------------------------------------------- */

struct denial {
	char instance[FIELD_MAX];
	char host[FIELD_MAX];
	char reason[64];
	char transport[16];
	long port; /* 0 when the log line has none */
	unsigned long count;
};

/* Copy a guest-influenced string, keeping printable ASCII only. */
static void
clean(char *dst, size_t n, const char *src)
{
	size_t i = 0;

	for (; src != NULL && *src && i + 1 < n; src++)
		dst[i++] = (char)((*src >= 0x21 && *src < 0x7f) ? *src : '?');
	dst[i] = '\0';
}

static const char *
jstr(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int
read_log(const char *path, struct denial **ret, size_t *ret_n)
{
	FILE *fp = fopen(path, "re");
	struct denial *v = NULL, *nv;
	size_t n = 0, i;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	if (fp == NULL) {
		fprintf(stderr, "egressctl: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while ((len = getline(&line, &cap, fp)) != -1) {
		json_t *o;
		const char *ev, *verdict, *inst, *host, *reason, *tr;
		struct denial d;

		if (len > LOG_LINE_MAX)
			continue;
		if ((o = json_loadb(line, (size_t)len, 0, NULL)) == NULL)
			continue;
		ev = jstr(o, "event");
		if (ev == NULL)
			ev = jstr(o, "msg");
		verdict = jstr(o, "verdict");
		inst = jstr(o, "instance");
		host = jstr(o, "host");
		reason = jstr(o, "reason");
		tr = jstr(o, "transport");
		if ((ev != NULL && strcmp(ev, "egress.decision") != 0) ||
		    verdict == NULL || strcmp(verdict, "deny") != 0 ||
		    inst == NULL) {
			json_decref(o);
			continue;
		}
		memset(&d, 0, sizeof(d));
		clean(d.instance, sizeof(d.instance), inst);
		clean(d.host, sizeof(d.host), host ? host : "?");
		clean(d.reason, sizeof(d.reason), reason ? reason : "?");
		clean(d.transport, sizeof(d.transport), tr ? tr : "http");
		if (json_is_integer(json_object_get(o, "port")) &&
		    json_integer_value(json_object_get(o, "port")) > 0 &&
		    json_integer_value(json_object_get(o, "port")) < 65536)
			d.port = (long)json_integer_value(json_object_get(o,
			    "port"));
		json_decref(o);
		for (i = 0; i < n; i++)
			if (strcmp(v[i].instance, d.instance) == 0 &&
			    strcmp(v[i].host, d.host) == 0 &&
			    strcmp(v[i].reason, d.reason) == 0)
				break;
		if (i < n) {
			v[i].count++;
			continue;
		}
		if (n == LOG_KEYS_MAX)
			continue;
		if ((nv = reallocarray(v, n + 1, sizeof(*v))) == NULL)
			break;
		v = nv;
		d.count = 1;
		v[n++] = d;
	}
	free(line);
	(void)fclose(fp);
	*ret = v;
	*ret_n = n;
	return 0;
}

/* The `egressctl check` command that replays one logged destination. */
static char *
check_cmd(const char *c, const char *qinst, const struct denial *d)
{
	int t = policy_transport_parse(d->transport);
	const char *host = d->host;
	int v6 = strchr(host, ':') != NULL;
	char hb[FIELD_MAX + 2], q[FIELD_MAX * 2 + 80], u[FIELD_MAX + 40];

	(void)snprintf(hb, sizeof(hb), v6 ? "[%s]" : "%s", host);
	if (t == POLICY_TRANSPORT_TCP || t == POLICY_TRANSPORT_TLS) {
		(void)snprintf(u, sizeof(u), "%s:%ld", hb, d->port);
		return fmt("%s check --transport %s %s %s", c, d->transport,
		    qinst, ctl_shq(u, q, sizeof(q)));
	}
	/* Port 443 is the TLS scheme's default; 80 the plain one's. */
	if (d->port == 443 || d->port == 80 || d->port == 0)
		(void)snprintf(u, sizeof(u), "%s%s://%s/",
		    t == POLICY_TRANSPORT_WEBSOCKET ? "ws" : "http",
		    d->port == 443 ? "s" : "", hb);
	else
		(void)snprintf(u, sizeof(u), "%s://%s:%ld/",
		    t == POLICY_TRANSPORT_WEBSOCKET ? "ws" : "http", hb,
		    d->port);
	return fmt("%s check %s %s", c, qinst, ctl_shq(u, q, sizeof(q)));
}

/* The class bits of an entry's host: an IP literal's class, loopback for
 * a name loopback by nature (localhost), 0 for any other name. */
static unsigned
entry_class(const struct conf_snapshot *s, const struct netaddr *own,
    const struct policy_entry *en)
{
	struct policy_addr a;

	if (policy_host_is_loopback_name(&en->host))
		return POLICY_CLASS_LOOPBACK;
	if (policy_addr_parse(en->host.name, &a) != 0)
		return 0;
	return ctl_classify(s, own, &a);
}

/*
 * The advice for a host whose addresses need a carve-out: loopback (with
 * this host's own addresses) or private, each its own. A note when the
 * file carves it out now; else the carve-out, with the grant first when
 * the host is not granted, since a carve-out only relaxes a grant.
 */
static void
advise_carve(const char *c, const char *q, const char *h, int loopback,
    int granted, int carved, const char **kind, const char **why, char **cmd)
{
	const char *opt = loopback ? "--loopback" : "--private";

	if (carved) {
		*kind = "note";
		*why = loopback ? "carved out now (egress_allow_loopback)" :
				  "carved out now (egress_allow_private)";
		return;
	}
	if (loopback)
		*why = granted ?
		    "resolves to loopback or to this host's own address: "
		    "carve it out (egress_allow_loopback) only if it is meant "
		    "to reach a service on this very host" :
		    "loopback or this host's own address, not granted: it "
		    "needs the grant and a loopback carve-out "
		    "(egress_allow_loopback), only if it is meant to reach a "
		    "service on this very host";
	else
		*why = granted ?
		    "resolves to a private address: carve it out "
		    "only if it is meant to be on your network" :
		    "a private address: it needs the grant and a "
		    "carve-out (egress_allow_private), only if it "
		    "is meant to be on your network";
	*cmd = granted ?
	    fmt("%s plugin grant %s %s %s", c, q, opt, h) :
	    fmt("%s plugin grant %s %s && %s plugin grant %s %s %s", c, q, h,
		c, q, opt, h);
}

/*
 * The advice for a private- or loopback-address denial. A name local by
 * nature other than localhost was refused before any lookup: its class is
 * what it resolves to, which was never asked, so no carve-out is named.
 */
static void
advise_address(const char *c, const char *q, const char *h, const char *r,
    unsigned cls, const struct policy_entry *en, int granted, int carved,
    int carved_lo, const char **kind, const char **why, char **cmd)
{
	int lo;

	if (strcmp(r, "private-address") == 0 &&
	    en->host.kind == POLICY_HOST_NAME &&
	    policy_host_is_local_name(&en->host) &&
	    !policy_host_is_loopback_name(&en->host)) {
		*why = "refused before any lookup (a name local by nature: "
		       ".local, .internal, .home.arpa): its addresses, and "
		       "so the carve-out it would need, are not known; look "
		       "the name up on this host and check an address it "
		       "has with the command below before carving anything "
		       "out";
		*cmd = fmt("%s check %s http://ADDRESS/", c, q);
		return;
	}
	lo = strcmp(r, "loopback-address") == 0 ||
	    (cls & POLICY_CLASS_LOOPBACK) != 0;
	advise_carve(c, q, h, lo, granted, lo ? carved_lo : carved, kind, why,
	    cmd);
}

/*
 * One (instance, host, reason) of the log. Every suggestion is checked
 * against the configuration as it is now: a grant the file already holds
 * is a note, and nothing is proposed that the address rules would refuse
 * whatever the grant (metadata, reserved); what would be needed instead
 * is said (the carve-out of the address's class, DNS for a name). A
 * private-address denial of a loopback literal or a localhost name
 * (logged before loopback was its own class) is advised as loopback.
 */
static void
diagnose_denial(const struct ctl_ctx *ctx, struct finding *f,
    const struct conf_snapshot *s, const struct netaddr *own,
    const struct denial *d)
{
	const struct conf_instance *ci = conf_instance_find(s, d->instance);
	const struct conf_manifest *m = ci ? ci->manifest : NULL;
	const char *c = ctl_cmd(ctx), *why = NULL, *kind = "log-denial";
	struct policy_entry en;
	struct policy_err pe;
	char q[600], h[600], *msg, *cmd = NULL, *dir;
	unsigned cls;
	int entry_ok, granted = 0, carved = 0, carved_lo = 0, declared = 1;
	int lo;
	const char *r = d->reason;

	entry_ok = policy_entry_parse(d->host, strlen(d->host),
		       conf_psl_is_public_suffix, NULL, &en, &pe) == 0;
	cls = entry_ok ? entry_class(s, own, &en) : 0;
	ctl_shq(d->instance, q, sizeof(q));
	ctl_shq(d->host, h, sizeof(h));
	if (ci != NULL && entry_ok) {
		granted = policy_grant_covers(ci->hosts, &en);
		carved = policy_grant_covers(ci->allow_private, &en);
		carved_lo = policy_grant_covers(ci->allow_loopback, &en);
		declared = m == NULL || m->operator_defined ||
		    policy_grant_covers(m->hosts, &en);
	}
	if (ci == NULL || strcmp(r, "unknown-instance") == 0) {
		if (ci == NULL) {
			why = "no such instance in the configuration now: "
			      "install or bind one under that name";
			cmd = fmt("%s plugin list", c);
		} else {
			kind = "note";
			why = "the instance exists now";
		}
	} else if (strcmp(r, "metadata") == 0 ||
	    (strcmp(r, "not-granted") == 0 && (cls & POLICY_CLASS_METADATA))) {
		why =
		    "the address rules refuse cloud metadata addresses "
		    "whatever the grant or carve-out, so no grant is "
		    "proposed; if a name resolves there, its DNS is wrong or "
		    "hostile (replay the verdict with the command below)";
		cmd = check_cmd(c, q, d);
	} else if (strcmp(r, "reserved-address") == 0 ||
	    (strcmp(r, "not-granted") == 0 && (cls & POLICY_CLASS_RESERVED))) {
		why =
		    "the address rules refuse reserved addresses "
		    "(unspecified, documentation, multicast, ...) whatever "
		    "the grant or carve-out, so no grant is proposed (replay "
		    "the verdict with the command below)";
		cmd = check_cmd(c, q, d);
	} else if (strcmp(r, "mixed-zones") == 0) {
		why =
		    "the name resolved to public and non-public addresses "
		    "at once: refused whatever the grant; fix the name's DNS "
		    "(replay the verdict with the command below)";
		cmd = check_cmd(c, q, d);
	} else if (strcmp(r, "unresolvable") == 0) {
		why = "the name did not resolve (DNS failure or no address), "
		      "not an address rule: check [resolver] servers and the "
		      "name (the command below resolves it the same way)";
		cmd = check_cmd(c, q, d);
	} else if (strcmp(r, "policy-unavailable") == 0) {
		why = "the broker had no valid configuration in force when it "
		      "decided (a broken file or a failed reload), not an "
		      "address rule: see the configuration error with the "
		      "command below";
		cmd = fmt("%s status", c);
	} else if (strcmp(r, "budget-exhausted") == 0) {
		why = "the instance's upstream leases were all in use (its "
		      "max_connections_per_instance, or its fair share of the "
		      "broker's): see its leases with the command below";
		cmd = fmt("%s instance %s", c, q);
	} else if (strcmp(r, "manifest-refused") == 0) {
		if (m != NULL) {
			kind = "note";
			why = "the manifest is accepted now";
		} else {
			why = "the instance's manifest is refused: verify it "
			      "with the command below";
			dir = reldir(s, ci->manifest_path);
			cmd = fmt("%s manifest verify %s", c, dir ? dir : ".");
			free(dir);
		}
	} else if (strcmp(r, "invalid-destination") == 0) {
		why = "the plugin asked for a destination that does not "
		      "parse: no grant changes that (replay it with the "
		      "command below)";
		cmd = check_cmd(c, q, d);
	} else if (strcmp(r, "no-permission") == 0) {
		int t = policy_transport_parse(d->transport);
		unsigned bit = t > 0 ? policy_transport_permission(t) : 0;
		const char *pn = bit ? policy_permission_name(bit) : NULL;

		if (pn == NULL) {
			why = "unknown transport in the log";
		} else if (ci->granted_permissions & bit) {
			kind = "note";
			why = "the permission is granted now";
		} else
			cmd = fmt("%s plugin grant %s --permission %s", c, q,
			    pn);
	} else if (strcmp(r, "not-granted") == 0 && entry_ok) {
		lo = (cls & POLICY_CLASS_LOOPBACK) != 0;
		if (granted &&
		    (!(cls & (POLICY_CLASS_PRIVATE | POLICY_CLASS_LOOPBACK)) ||
			(lo ? carved_lo : carved))) {
			kind = "note";
			why = "granted now (the file changed after these "
			      "denials): nothing to do";
		} else if (!declared) {
			why = "not granted, and not declared by the package "
			      "either: a grant alone will not help; only a "
			      "version that declares it can reach it";
			cmd = fmt("%s plugin upgrade PKG", c);
		} else if (cls &
		    (POLICY_CLASS_PRIVATE | POLICY_CLASS_LOOPBACK))
			advise_carve(c, q, h, lo, granted,
			    lo ? carved_lo : carved, &kind, &why, &cmd);
		else
			cmd = fmt("%s plugin grant %s %s", c, q, h);
	} else if (strcmp(r, "not-declared") == 0 && entry_ok) {
		if (declared && granted) {
			kind = "note";
			why = "the package declares it now";
		} else {
			why = "granted, but the package does not declare it: "
			      "only a version that declares it can reach it";
			cmd = fmt("%s plugin upgrade PKG", c);
		}
	} else if ((strcmp(r, "private-address") == 0 ||
		       strcmp(r, "loopback-address") == 0) &&
	    entry_ok) {
		advise_address(c, q, h, r, cls, &en, granted, carved,
		    carved_lo, &kind, &why, &cmd);
	} else if (!entry_ok) {
		why = "the logged host is not a valid grant entry";
	} else
		why = "a reason this egressctl does not know";
	msg = fmt("%lu denial%s in the log (%s)%s%s", d->count,
	    d->count == 1 ? "" : "s", d->reason, why ? ": " : "",
	    why ? why : "");
	add(f, d->instance, kind, d->host, msg ? msg : "?", cmd);
	free(msg);
	free(cmd);
}

static void
diagnose_usage(FILE *fp)
{
	fprintf(fp,
	    "usage: egressctl [-c FILE] diagnose [--log FILE] [--json] "
	    "[--nat64 | --no-nat64]\n");
}

int
ctl_diagnose_main(struct ctl_ctx *ctx, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "log", required_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },
		{ "nat64", no_argument, NULL, 'n' },
		{ "no-nat64", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct nat64disc_result nr;
	int nat64 = -1, tmo;
	struct conf_snapshot *s = NULL;
	struct finding f = { NULL, 0, 0 };
	struct denial *den = NULL;
	struct netaddr *own = NULL;
	const char *logpath = NULL;
	size_t i, nden = 0;
	int ch, rc = CTL_EXIT_ERROR;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (ch == 'l')
			logpath = optarg;
		else if (ch == 'j')
			f.json = 1;
		else if (ch == 'n' || ch == 'N')
			nat64 = ch == 'n';
		else if (ch == 'h') {
			diagnose_usage(stdout);
			return CTL_EXIT_OK;
		} else {
			diagnose_usage(stderr);
			return CTL_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr,
		    "egressctl: diagnose: unexpected argument "
		    "'%s'\n",
		    argv[optind]);
		diagnose_usage(stderr);
		return CTL_EXIT_USAGE;
	}
	if (ctl_conf_load(ctx->config_path, &s) != 0) {
		rc = CTL_EXIT_CONFIG;
		goto out;
	}
	if (logpath != NULL && read_log(logpath, &den, &nden) != 0) {
		rc = CTL_EXIT_SYSTEM;
		goto out;
	}
	if (f.json && (f.items = json_array()) == NULL)
		goto out;
	if (s->sig_mode == CONF_SIG_DISABLED) {
		char *cmd = fmt("edit %s: [plugins.security] signature_mode "
				"= strict",
		    ctx->config_path);

		add(&f, NULL, "warning", "signature_mode",
		    "disabled: no "
		    "package signature is checked",
		    cmd);
		free(cmd);
	}
	if (s->sig_mode == CONF_SIG_STRICT && s->ntrusted_keys == 0) {
		char *cmd = fmt("%s trust add KEY.pub", ctl_cmd(ctx));

		add(&f, NULL, "warning", "trusted_keys",
		    "strict mode with no "
		    "trusted key: every package is refused; trust the "
		    "public key packages are signed with",
		    cmd);
		free(cmd);
	}
	if (s->ninstances == 0) {
		char *cmd = fmt("%s plugin install PKG", ctl_cmd(ctx));

		add(&f, NULL, "warning", "plugins.entries",
		    "no instance is "
		    "configured: no plugin has network reach",
		    cmd);
		free(cmd);
	}
	for (i = 0; i < s->ninstances; i++)
		diagnose_instance(ctx, &f, s, &s->instances[i]);
	if (nden > 0)
		(void)ctl_own_read("diagnose's findings", &own);
	for (i = 0; i < nden; i++)
		diagnose_denial(ctx, &f, s, own, &den[i]);
	/* NAT64 through the broker's configured resolver only (unless
	 * asked): a diagnose sends no query the broker would not. */
	if (nat64 == -1)
		nat64 = s->nresolver_servers > 0;
	tmo = s->resolver_timeout_ms > 0 &&
		s->resolver_timeout_ms < DIAG_NAT64_TIMEOUT_MS ?
	    (int)s->resolver_timeout_ms :
	    DIAG_NAT64_TIMEOUT_MS;
	if (nat64 &&
	    nat64disc_check_sync((const char *const *)s->resolver_servers,
		s->nresolver_servers, tmo, &s->nat64, &nr) == 0 &&
	    nr.dns_ok && nr.nundeclared > 0)
		add(&f, NULL, "nat64", "nat64_prefixes", nr.warning,
		    nr.suggestion);
	if (f.json)
		(void)ctl_print_json(f.items);
	else if (f.n == 0)
		printf("nothing to act on\n");
	rc = f.n == 0 ? CTL_EXIT_OK : CTL_EXIT_NO;
out:
	json_decref(f.items);
	free(den);
	netaddr_free(own);
	conf_snapshot_free(s);
	return rc;
}
