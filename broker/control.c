/* SPDX-License-Identifier: ISC */
/*
 * The control protocol of egressd: the line dispatcher that turns one
 * command into one JSON (or Prometheus text) reply through struct
 * control_ops, and the connection server with its SO_PEERCRED check,
 * bounded input and output, and SCM_RIGHTS for `attach`. See control.h
 * and docs/deployment.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include <egress/error.h>

#include "broker/control.h"
#include "broker/log.h"
#include "broker/metrics.h"

#define CONTROL_WORDS_MAX 4

/* ---- Replies ---------------------------------------------------------- */

void
control_reply_done(struct control_reply *r)
{
	if (r == NULL)
		return;
	free(r->text);
	r->text = NULL;
	r->len = 0;
	if (r->fd >= 0)
		(void)close(r->fd);
	r->fd = -1;
}

/* Serialise obj (consumed) as one line and deliver it with fd and hold. */
static int
reply_json_hold(json_t *obj, int fd, uint64_t hold, control_reply_fn fn,
    void *arg)
{
	struct control_reply r = { NULL, 0, -1, 0 };
	char *s;
	size_t n;

	if (obj == NULL) {
		if (fd >= 0)
			(void)close(fd);
		return EGRESS_ERR_NOMEM;
	}
	s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(obj);
	if (s == NULL || (r.text = malloc((n = strlen(s)) + 2)) == NULL) {
		free(s);
		if (fd >= 0)
			(void)close(fd);
		return EGRESS_ERR_NOMEM;
	}
	memcpy(r.text, s, n);
	r.text[n] = '\n';
	r.text[n + 1] = '\0';
	r.len = n + 1;
	free(s);
	r.fd = fd;
	r.hold = hold;
	fn(arg, &r);
	control_reply_done(&r);
	return 0;
}

static int
reply_json(json_t *obj, int fd, control_reply_fn fn, void *arg)
{
	return reply_json_hold(obj, fd, 0, fn, arg);
}

static int
reply_error(const char *msg, const char *code, control_reply_fn fn, void *arg)
{
	return reply_json(json_pack("{s:s, s:s}", "error", msg, "code", code),
	    -1, fn, arg);
}

/* A JSON string, or null for NULL or text that is not UTF-8. */
static json_t *
js(const char *s)
{
	json_t *v;

	if (s == NULL)
		return json_null();
	v = json_string(s);
	return v != NULL ? v : json_null();
}

static json_t *
addr_array(const struct policy_addr *v, size_t n)
{
	json_t *a = json_array();
	char buf[64];
	size_t i;

	if (a == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if (policy_addr_format(&v[i], buf, sizeof(buf)) == 0)
			(void)json_array_append_new(a, json_string(buf));
	return a;
}

static json_t *
grant_array(const struct policy_grant *g)
{
	json_t *a = json_array();
	char buf[POLICY_NAME_MAX + 8];
	size_t i;

	if (a == NULL)
		return NULL;
	for (i = 0; i < policy_grant_count(g); i++)
		if (policy_entry_format(policy_grant_entry(g, i), buf,
			sizeof(buf)) >= 0)
			(void)json_array_append_new(a, json_string(buf));
	return a;
}

static json_t *
perm_array(unsigned mask)
{
	json_t *a = json_array();
	unsigned bit;

	if (a == NULL)
		return NULL;
	for (bit = 1; bit != 0 && bit <= mask; bit <<= 1)
		if ((mask & bit) && policy_permission_name(bit) != NULL)
			(void)json_array_append_new(a,
			    json_string(policy_permission_name(bit)));
	return a;
}

static json_t *
rfc3339(int64_t t)
{
	struct tm tm;
	time_t tt = (time_t)t;
	char buf[32];

	if (t <= 0 || gmtime_r(&tt, &tm) == NULL ||
	    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return json_null();
	return json_string(buf);
}

/* ---- Commands --------------------------------------------------------- */

/* The instances of s whose manifest is refused, and why. */
static json_t *
refused_array(const struct conf_snapshot *s)
{
	json_t *a = json_array(), *o;
	size_t i;

	for (i = 0; a != NULL && i < s->ninstances; i++) {
		if (s->instances[i].manifest != NULL)
			continue;
		o = json_pack("{s:o, s:o, s:o, s:o}", "instance",
		    js(s->instances[i].name), "plugin",
		    js(s->instances[i].plugin), "entry",
		    json_sprintf("%s:%d", s->path, s->instances[i].line),
		    "error", js(s->instances[i].manifest_error));
		if (o != NULL)
			(void)json_array_append_new(a, o);
	}
	return a;
}

/* The configuration's errors, [] when it is fine. */
static json_t *
errors_array(const struct control_status *st)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < st->nconfig_errors; i++)
		(void)json_array_append_new(a, js(st->config_errors[i]));
	if (a != NULL && st->nconfig_errors == 0 && st->config_error != NULL)
		(void)json_array_append_new(a, js(st->config_error));
	return a;
}

static int
cmd_status(const struct control_ops *ops, void *b, control_reply_fn fn,
    void *arg)
{
	struct control_status st;

	memset(&st, 0, sizeof(st));
	ops->status(b, &st);
	return reply_json(
	    json_pack(
		"{s:o, s:I, s:I, s:{s:o, s:I, s:o, s:o, "
		"s:o, s:o, s:I, s:I, s:o}, s:I, s:I, s:I, s:I, s:{s:I, s:o}, "
		"s:{s:o, s:o}}",
		"version", js(st.version), "pid", (json_int_t)st.pid,
		"uptime_s", (json_int_t)st.uptime_s, "config", "path",
		js(st.config_path), "generation", (json_int_t)st.generation,
		"loaded_at", rfc3339(st.loaded_unix), "error",
		js(st.config_error), "errors", errors_array(&st),
		"error_since", rfc3339(st.config_error_since), "reloads",
		(json_int_t)st.reloads, "reload_failures",
		(json_int_t)st.reload_failures, "watch", js(st.config_watch),
		"instances",
		(json_int_t)(ops->snapshot(b) != NULL ?
			ops->snapshot(b)->ninstances :
			0),
		"connections", (json_int_t)st.connections, "requests",
		(json_int_t)st.requests, "leases", (json_int_t)st.leases,
		"local_addresses", "generation",
		(json_int_t)st.local_generation, "addresses",
		addr_array(st.local, st.nlocal), "nat64", "warning",
		js(st.nat64_warning), "suggestion", js(st.nat64_suggestion)),
	    -1, fn, arg);
}

/* One instance as `show instances` lists it; detail adds reasons. */
static json_t *
instance_json(const struct control_ops *ops, void *b,
    const struct conf_snapshot *s, const struct conf_instance *ci, int detail)
{
	struct metrics_instance mi;
	const struct conf_manifest *m = ci->manifest;
	char sock[4096];
	json_t *o, *r;
	size_t i;

	metrics_instance_get(ops->metrics(b), ci->name, &mi);
	(void)snprintf(sock, sizeof(sock), "%s/%s.sock",
	    s->instance_socket_dir, ci->name);
	o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:I, "
		      "s:I}",
	    "name", js(ci->name), "plugin", js(ci->plugin), "version",
	    js(m != NULL ? m->version : NULL), "manifest",
	    m != NULL ? json_string("ok") : json_string("refused"), "socket",
	    js(sock), "leases", (json_int_t)ops->leases(b, ci->name), "budget",
	    (json_int_t)s->max_connections_per_instance, "allowed",
	    (json_int_t)mi.allowed, "denied", (json_int_t)mi.denied,
	    "bytes_in", (json_int_t)mi.bytes_in, "bytes_out",
	    (json_int_t)mi.bytes_out);
	if (o == NULL || !detail)
		return o;
	if ((r = json_object()) != NULL) {
		for (i = 0; i < mi.nreasons; i++)
			(void)json_object_set_new(r, mi.reasons[i].reason,
			    json_integer((json_int_t)mi.reasons[i].count));
		(void)json_object_set_new(o, "denied_by_reason", r);
	}
	(void)json_object_set_new(o, "permissions",
	    perm_array(ci->policy.permissions));
	if ((r = json_array()) != NULL) {
		for (i = 0; i < ci->ntls_profiles; i++)
			(void)json_array_append_new(r,
			    json_string(ci->tls_profiles[i]));
		(void)json_object_set_new(o, "tls_profiles", r);
	}
	(void)json_object_set_new(o, "signature",
	    js(m != NULL ? conf_sig_status_str(m->sig) : NULL));
	(void)json_object_set_new(o, "manifest_error", js(ci->manifest_error));
	return o;
}

static int
cmd_instances(const struct control_ops *ops, void *b, control_reply_fn fn,
    void *arg)
{
	const struct conf_snapshot *s = ops->snapshot(b);
	json_t *a;
	size_t i;

	if (s == NULL)
		return reply_error("configuration unavailable", "unavailable",
		    fn, arg);
	if ((a = json_array()) == NULL)
		return EGRESS_ERR_NOMEM;
	for (i = 0; i < s->ninstances; i++)
		(void)json_array_append_new(a,
		    instance_json(ops, b, s, &s->instances[i], 0));
	return reply_json(json_pack("{s:o}", "instances", a), -1, fn, arg);
}

static const struct conf_instance *
find_instance(const struct control_ops *ops, void *b, const char *name,
    control_reply_fn fn, void *arg, int *ret_rc)
{
	const struct conf_snapshot *s = ops->snapshot(b);
	const struct conf_instance *ci;

	if (s == NULL) {
		*ret_rc = reply_error("configuration unavailable",
		    "unavailable", fn, arg);
		return NULL;
	}
	if ((ci = conf_instance_find(s, name)) == NULL)
		*ret_rc = reply_error("no such instance", "not-found", fn,
		    arg);
	return ci;
}

static int
cmd_instance(const struct control_ops *ops, void *b, const char *name,
    control_reply_fn fn, void *arg)
{
	const struct conf_instance *ci;
	int rc = 0;

	if ((ci = find_instance(ops, b, name, fn, arg, &rc)) == NULL)
		return rc;
	return reply_json(instance_json(ops, b, ops->snapshot(b), ci, 1), -1,
	    fn, arg);
}

/*
 * The entries of a and b that the other covers: for this grammar (exact
 * hosts and "*.suffix"), exactly the intersection of what they match.
 */
static struct policy_grant *
grant_intersect(const struct policy_grant *a, const struct policy_grant *b)
{
	struct policy_grant *g;
	size_t i;

	if ((g = policy_grant_new()) == NULL)
		return NULL;
	for (i = 0; i < policy_grant_count(a); i++)
		if (policy_grant_covers(b, policy_grant_entry(a, i)) &&
		    policy_grant_add(g, policy_grant_entry(a, i)) != 0)
			goto fail;
	for (i = 0; i < policy_grant_count(b); i++)
		if (policy_grant_covers(a, policy_grant_entry(b, i)) &&
		    policy_grant_add(g, policy_grant_entry(b, i)) != 0)
			goto fail;
	return g;
fail:
	policy_grant_free(g);
	return NULL;
}

/* Entries of a that match nothing of b. */
static json_t *
grant_outside(const struct policy_grant *a, const struct policy_grant *eff)
{
	json_t *arr = json_array();
	char buf[POLICY_NAME_MAX + 8];
	const struct policy_entry *e;
	size_t i;

	if (arr == NULL)
		return NULL;
	for (i = 0; i < policy_grant_count(a); i++) {
		e = policy_grant_entry(a, i);
		if (policy_grant_covers(eff, e))
			continue;
		if (policy_entry_format(e, buf, sizeof(buf)) >= 0)
			(void)json_array_append_new(arr, json_string(buf));
	}
	return arr;
}

static int
cmd_grants(const struct control_ops *ops, void *b, const char *name,
    control_reply_fn fn, void *arg)
{
	const struct conf_instance *ci;
	const struct policy_instance *pi;
	struct policy_grant *eff = NULL, *carve = NULL, *carve_lo = NULL;
	struct policy_grant *empty = NULL;
	json_t *o;
	int rc = 0;

	if ((ci = find_instance(ops, b, name, fn, arg, &rc)) == NULL)
		return rc;
	pi = &ci->policy;
	if ((empty = policy_grant_new()) == NULL)
		return EGRESS_ERR_NOMEM;
	if (!pi->manifest_ok)
		eff = policy_grant_new(); /* a refused manifest: nothing */
	else if (pi->operator_defined || pi->declared == NULL)
		eff = grant_intersect(pi->hosts, pi->hosts);
	else
		eff = grant_intersect(pi->hosts, pi->declared);
	if (eff != NULL) {
		carve = grant_intersect(pi->allow_private, eff);
		carve_lo = grant_intersect(pi->allow_loopback, eff);
	}
	if (eff == NULL || carve == NULL || carve_lo == NULL) {
		policy_grant_free(eff);
		policy_grant_free(carve);
		policy_grant_free(carve_lo);
		policy_grant_free(empty);
		return EGRESS_ERR_NOMEM;
	}
	o = json_pack("{s:o, s:o, s:b, s:b, s:o, s:o, s:o, s:o, s:o, s:o, "
		      "s:o, s:o, s:o, s:o}",
	    "instance", js(ci->name), "plugin", js(ci->plugin), "manifest_ok",
	    pi->manifest_ok != 0, "operator_defined",
	    pi->operator_defined != 0, "permissions",
	    perm_array(pi->permissions), "effective", grant_array(eff),
	    "allow_private_effective", grant_array(carve),
	    "allow_loopback_effective", grant_array(carve_lo), "egress_hosts",
	    grant_array(pi->hosts), "egress_allow_private",
	    grant_array(pi->allow_private), "egress_allow_loopback",
	    grant_array(pi->allow_loopback), "declared",
	    grant_array(pi->declared), "granted_not_effective",
	    grant_outside(pi->hosts, eff), "declared_not_granted",
	    pi->declared != NULL && !pi->operator_defined ?
		grant_outside(pi->declared, eff) :
		grant_array(empty));
	policy_grant_free(eff);
	policy_grant_free(carve);
	policy_grant_free(carve_lo);
	policy_grant_free(empty);
	return reply_json(o, -1, fn, arg);
}

int
control_metrics_text(const struct control_ops *ops, void *b, char **ret_text,
    size_t *ret_len)
{
	const struct conf_snapshot *s = ops->snapshot(b);
	struct metrics_gauge *g = NULL;
	struct metrics_process proc;
	struct metrics_facts f;
	struct control_status st;
	size_t i, n = s != NULL ? s->ninstances : 0;
	int err;

	if (n > 0 && (g = calloc(n, sizeof(*g))) == NULL)
		return EGRESS_ERR_NOMEM;
	for (i = 0; i < n; i++) {
		g[i].instance = s->instances[i].name;
		g[i].value = ops->leases(b, s->instances[i].name);
	}
	memset(&st, 0, sizeof(st));
	ops->status(b, &st);
	memset(&f, 0, sizeof(f));
	f.version = st.version;
	f.config_valid = s != NULL && st.config_error == NULL;
	f.config_generation = st.generation;
	f.config_loaded_unix = st.loaded_unix;
	f.config_reloads = st.reloads;
	f.config_reload_failures = st.reload_failures;
	f.leases = g;
	f.nleases = n;
	f.upstream_max = st.upstream_max;
	f.log_queued = st.log_queued;
	f.log_backlogs = st.log_backlogs;
	f.poll_hits = st.poll_hits;
	f.poll_us = st.poll_us;
	f.process = metrics_process_read(&proc) == 0 ? &proc : NULL;
	err = metrics_format(ops->metrics(b), &f, ret_text, ret_len);
	free(g);
	return err;
}

/* The exposition, then one empty line that ends the reply. */
static int
cmd_metrics(const struct control_ops *ops, void *b, control_reply_fn fn,
    void *arg)
{
	struct control_reply r = { NULL, 0, -1, 0 };
	char *p;
	int err;

	if ((err = control_metrics_text(ops, b, &r.text, &r.len)) != 0)
		return err;
	if ((p = realloc(r.text, r.len + 2)) == NULL) {
		free(r.text);
		return EGRESS_ERR_NOMEM;
	}
	r.text = p;
	r.text[r.len++] = '\n';
	r.text[r.len] = '\0';
	fn(arg, &r);
	control_reply_done(&r);
	return 0;
}

static int
cmd_reload(const struct control_ops *ops, void *b, control_reply_fn fn,
    void *arg)
{
	struct control_status st;
	int err;

	err = ops->reload(b);
	memset(&st, 0, sizeof(st));
	ops->status(b, &st);
	if (err != 0 || st.config_error != NULL)
		return reply_json(json_pack("{s:s, s:s, s:o, s:o, s:o}",
				      "error", "reload failed", "code",
				      "failed", "detail",
				      js(st.config_error != NULL ?
					      st.config_error :
					      egress_strerror(err)),
				      "errors",
				      err != 0 && st.config_error == NULL ?
					  json_pack("[s]",
					      egress_strerror(err)) :
					  errors_array(&st),
				      "path", js(st.config_path)),
		    -1, fn, arg);
	return reply_json(json_pack("{s:b, s:I, s:I, s:o*}", "reloaded", 1,
			      "generation", (json_int_t)st.generation,
			      "instances",
			      (json_int_t)(ops->snapshot(b) != NULL ?
				      ops->snapshot(b)->ninstances :
				      0),
			      "refused",
			      ops->snapshot(b) != NULL ?
				  refused_array(ops->snapshot(b)) :
				  NULL),
	    -1, fn, arg);
}

static int
cmd_attach(const struct control_ops *ops, void *b, const char *name,
    control_reply_fn fn, void *arg)
{
	const struct conf_instance *ci;
	int rc = 0, fd = -1, err;

	if ((ci = find_instance(ops, b, name, fn, arg, &rc)) == NULL)
		return rc;
	err = ops->attach(b, ci->name, &fd);
	if (err == EGRESS_ERR_NOT_FOUND)
		return reply_error("no such instance", "not-found", fn, arg);
	if (err != 0 || fd < 0)
		return reply_error("attach failed", "failed", fn, arg);
	return reply_json(json_pack("{s:s}", "attached", ci->name), fd, fn,
	    arg);
}

static void
fds_close(int *fds, size_t nfds)
{
	size_t i;

	for (i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			(void)close(fds[i]);
}

/*
 * attach-listener: the broker serves fds for the instance; the reply
 * carries the hold that the connection ends when it closes.
 */
static int
cmd_attach_listener(const struct control_ops *ops, void *b, const char *name,
    int *fds, size_t nfds, control_reply_fn fn, void *arg)
{
	const struct conf_instance *ci;
	const char *msg = "attach-listener failed";
	uint64_t hold = 0;
	json_t *o;
	int rc = 0, err;

	if (ops->attach_listener == NULL || ops->detach_listener == NULL) {
		fds_close(fds, nfds);
		return reply_error("attach-listener not served here",
		    "unavailable", fn, arg);
	}
	if ((ci = find_instance(ops, b, name, fn, arg, &rc)) == NULL) {
		fds_close(fds, nfds);
		return rc;
	}
	if (nfds == 0)
		return reply_error("attach-listener needs listening sockets "
				   "sent with the line (SCM_RIGHTS)",
		    "usage", fn, arg);
	err = ops->attach_listener(b, ci->name, fds, nfds, &hold, &msg);
	if (err == EGRESS_ERR_NOT_FOUND)
		return reply_error("no such instance", "not-found", fn, arg);
	if (err == EGRESS_ERR_TOO_BIG)
		return reply_error(msg, "unavailable", fn, arg);
	if (err == EGRESS_ERR_INVALID)
		return reply_error(msg, "usage", fn, arg);
	if (err != 0 || hold == 0)
		return reply_error("attach-listener failed", "failed", fn,
		    arg);
	/* An inspected instance's launcher gets the CA to hand its
	 * clients (egress-sandbox --inspect). */
	o = json_pack("{s:s, s:I}", "attached_listener", ci->name, "listeners",
	    (json_int_t)nfds);
	if (o != NULL && ci->tls_inspect &&
	    ops->snapshot(b)->inspect_ca_pem != NULL &&
	    json_object_set_new(o, "inspect_ca",
		json_string(ops->snapshot(b)->inspect_ca_pem)) != 0) {
		json_decref(o);
		o = NULL;
	}
	rc = reply_json_hold(o, -1, hold, fn, arg);
	if (rc != 0)
		ops->detach_listener(b, hold);
	return rc;
}

/* A check in flight. */
struct check_ctx {
	control_reply_fn fn;
	void *arg;
	int sync; /* still inside ops->check */
	int done;
	int rc;
	char instance[CONF_NAME_MAX + 1];
	char dest[CONTROL_LINE_MAX];
};

static void
check_done(void *arg, const struct control_check_result *res)
{
	struct check_ctx *c = arg;
	json_t *o;

	if (res->error != 0)
		o = json_pack("{s:s, s:s, s:s, s:s}", "error", "check failed",
		    "code", "failed", "instance", c->instance, "detail",
		    egress_err_code(res->error) != NULL ?
			egress_err_code(res->error) :
			egress_strerror(res->error));
	else
		o = json_pack("{s:s, s:o, s:s, s:o, s:o, s:o}", "instance",
		    c->instance, "destination", js(c->dest), "verdict",
		    res->allow ? "allow" : "deny", "reason",
		    res->allow ? json_null() : js(res->reason), "addresses",
		    addr_array(res->addrs, res->naddrs), "answers",
		    addr_array(res->answers, res->nanswers));
	c->rc = reply_json(o, -1, c->fn, c->arg);
	c->done = 1;
	if (!c->sync)
		free(c);
}

static int
cmd_check(const struct control_ops *ops, void *b, const char *name,
    const char *dest, control_reply_fn fn, void *arg)
{
	const struct conf_instance *ci;
	struct check_ctx *c;
	int rc = 0, err;

	if ((ci = find_instance(ops, b, name, fn, arg, &rc)) == NULL)
		return rc;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return EGRESS_ERR_NOMEM;
	c->fn = fn;
	c->arg = arg;
	c->sync = 1;
	(void)snprintf(c->instance, sizeof(c->instance), "%s", ci->name);
	(void)snprintf(c->dest, sizeof(c->dest), "%s", dest);
	err = ops->check(b, c->instance, c->dest, check_done, c);
	c->sync = 0;
	if (err != 0) {
		free(c);
		return reply_error("check failed", "failed", fn, arg);
	}
	if (c->done) {
		rc = c->rc;
		free(c);
		return rc;
	}
	return 1;
}

static int
cmd_help(control_reply_fn fn, void *arg)
{
	return reply_json(json_pack("{s:[s,s,s,s,s,s,s,s,s,s]}", "commands",
			      "show status", "show instances",
			      "show instance NAME", "show grants NAME",
			      "show metrics", "check INSTANCE DESTINATION",
			      "reload", "attach INSTANCE",
			      "attach-listener INSTANCE", "help"),
	    -1, fn, arg);
}

/* A NAME argument: printable ASCII without spaces, at most the max. */
static int
name_ok(const char *s)
{
	return strlen(s) <= CONF_NAME_MAX;
}

int
control_dispatch(const struct control_ops *ops, void *b, const char *line,
    size_t len, control_reply_fn fn, void *arg)
{
	return control_dispatch_fds(ops, b, line, len, NULL, 0, fn, arg);
}

int
control_dispatch_fds(const struct control_ops *ops, void *b, const char *line,
    size_t len, int *fds, size_t nfds, control_reply_fn fn, void *arg)
{
	char buf[CONTROL_LINE_MAX + 1];
	char *w[CONTROL_WORDS_MAX + 1];
	const char *msg = NULL;
	size_t i, nw = 0;
	char *p;

	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (len > CONTROL_LINE_MAX)
		msg = "line too long";
	for (i = 0; msg == NULL && i < len; i++) {
		unsigned char ch = (unsigned char)line[i];

		if ((ch < 0x20 && ch != '\t') || ch >= 0x7f)
			msg = "invalid byte in command";
	}
	if (msg == NULL) {
		memcpy(buf, line, len);
		buf[len] = '\0';
	}
	for (p = buf; msg == NULL && *p != '\0';) {
		while (*p == ' ' || *p == '\t')
			*p++ = '\0';
		if (*p == '\0')
			break;
		if (nw == CONTROL_WORDS_MAX) {
			msg = "too many words";
			break;
		}
		w[nw++] = p;
		while (*p != '\0' && *p != ' ' && *p != '\t')
			p++;
	}
	w[nw] = NULL;
	if (msg == NULL && nw == 0)
		msg = "empty command (try: help)";
	if (msg != NULL) {
		fds_close(fds, nfds);
		return reply_error(msg, "usage", fn, arg);
	}
	if (strcmp(w[0], "attach-listener") == 0 && nw == 2 && name_ok(w[1]))
		return cmd_attach_listener(ops, b, w[1], fds, nfds, fn, arg);
	if (nfds > 0) {
		fds_close(fds, nfds);
		return reply_error("descriptors sent with a command that "
				   "takes none",
		    "usage", fn, arg);
	}
	if (strcmp(w[0], "show") == 0 && nw >= 2) {
		if (strcmp(w[1], "status") == 0 && nw == 2)
			return cmd_status(ops, b, fn, arg);
		if (strcmp(w[1], "instances") == 0 && nw == 2)
			return cmd_instances(ops, b, fn, arg);
		if (strcmp(w[1], "metrics") == 0 && nw == 2)
			return cmd_metrics(ops, b, fn, arg);
		if (strcmp(w[1], "instance") == 0 && nw == 3 && name_ok(w[2]))
			return cmd_instance(ops, b, w[2], fn, arg);
		if (strcmp(w[1], "grants") == 0 && nw == 3 && name_ok(w[2]))
			return cmd_grants(ops, b, w[2], fn, arg);
	} else if (strcmp(w[0], "check") == 0 && nw == 3 && name_ok(w[1]))
		return cmd_check(ops, b, w[1], w[2], fn, arg);
	else if (strcmp(w[0], "reload") == 0 && nw == 1)
		return cmd_reload(ops, b, fn, arg);
	else if (strcmp(w[0], "attach") == 0 && nw == 2 && name_ok(w[1]))
		return cmd_attach(ops, b, w[1], fn, arg);
	else if (strcmp(w[0], "help") == 0 && nw == 1)
		return cmd_help(fn, arg);
	if (strcmp(w[0], "show") == 0 || strcmp(w[0], "check") == 0 ||
	    strcmp(w[0], "reload") == 0 || strcmp(w[0], "attach") == 0 ||
	    strcmp(w[0], "attach-listener") == 0)
		return reply_error("wrong arguments (try: help)", "usage", fn,
		    arg);
	return reply_error("unknown command (try: help)", "unknown-command",
	    fn, arg);
}

/* ---- Peers ------------------------------------------------------------ */

int
control_peer_allowed(const struct conf_snapshot *s, uid_t uid, gid_t gid)
{
	size_t i;

	if (s == NULL)
		return uid == 0;
	for (i = 0; i < s->ncontrol_uids; i++)
		if (s->control_uids[i] == uid)
			return 1;
	for (i = 0; i < s->ncontrol_gids; i++)
		if (s->control_gids[i] == gid)
			return 1;
	return 0;
}

/* ---- Server ----------------------------------------------------------- */

struct outq {
	struct outq *next;
	struct control_reply r;
	size_t off;
};

struct cconn {
	struct cconn *next, *prev;
	struct control_server *cs; /* NULL once the server is gone */
	int fd;
	struct event *rd, *wr;
	char in[CONTROL_LINE_MAX + 2];
	size_t nin;
	struct outq *out, **out_tail;
	size_t nout;
	int pending; /* a check in flight */
	int dead;    /* free when the check returns */
	int eof;     /* peer finished sending */
	/* Descriptors received, each with the offset in in[] of the byte it
	 * came with: it belongs to the line holding that byte. */
	int fds[CONTROL_FDS_MAX];
	size_t fd_off[CONTROL_FDS_MAX];
	size_t nfds;
	uint64_t hold; /* attached listeners this connection keeps open */
	uid_t uid;     /* the peer, as SO_PEERCRED gave it */
	gid_t gid;
	struct event *idle; /* CONTROL_IDLE_MS without a command */
};

struct control_server {
	struct event_base *base;
	const struct control_ops *ops;
	void *broker;
	struct cconn *conns;
	size_t nconns;	  /* counted against CONTROL_CONNS_MAX */
	size_t nholds;	  /* connections that became holds (not counted) */
	unsigned idle_ms; /* CONTROL_IDLE_MS unless a test said */
};

static void server_reply(void *arg, struct control_reply *r);

static void
cconn_free(struct cconn *c)
{
	struct outq *q;

	if (c->cs != NULL) {
		if (c->prev != NULL)
			c->prev->next = c->next;
		else
			c->cs->conns = c->next;
		if (c->next != NULL)
			c->next->prev = c->prev;
		if (c->hold != 0) {
			c->cs->nholds--;
			c->cs->ops->detach_listener(c->cs->broker, c->hold);
			c->hold = 0;
		} else
			c->cs->nconns--;
		c->cs = NULL;
	}
	fds_close(c->fds, c->nfds);
	c->nfds = 0;
	if (c->rd != NULL)
		event_free(c->rd);
	if (c->wr != NULL)
		event_free(c->wr);
	if (c->idle != NULL)
		event_free(c->idle);
	c->rd = c->wr = NULL;
	c->idle = NULL;
	if (c->fd >= 0)
		(void)close(c->fd);
	c->fd = -1;
	while ((q = c->out) != NULL) {
		c->out = q->next;
		control_reply_done(&q->r);
		free(q);
	}
	if (c->pending) {
		c->dead = 1; /* check_done still holds c */
		return;
	}
	free(c);
}

/*
 * The reply created a hold: from now on c keeps it (ended by
 * cconn_free()) and counts as a hold, outside CONTROL_CONNS_MAX. A
 * connection that cannot keep it ends it at once.
 */
static void
cconn_take_hold(struct cconn *c, struct control_reply *r)
{
	uint64_t hold = r->hold;

	r->hold = 0;
	if (hold == 0)
		return;
	if (c->cs == NULL || c->dead || c->hold != 0) {
		if (c->cs != NULL)
			c->cs->ops->detach_listener(c->cs->broker, hold);
		return;
	}
	c->hold = hold;
	c->cs->nconns--;
	c->cs->nholds++;
}

static void
cconn_reply(void *arg, struct control_reply *r)
{
	struct cconn *c = arg;
	struct outq *q;

	cconn_take_hold(c, r);
	if (c->dead || c->nout + r->len > CONTROL_OUT_MAX ||
	    (q = calloc(1, sizeof(*q))) == NULL) {
		c->eof = 1; /* cannot answer: close after what is queued */
		return;
	}
	q->r = *r;
	r->text = NULL;
	r->fd = -1;
	c->nout += q->r.len;
	*c->out_tail = q;
	c->out_tail = &q->next;
}

static void cconn_idle_arm(struct cconn *c);

/* Send queued replies; the fd of an attach goes with its first byte. */
static int
cconn_flush(struct cconn *c)
{
	struct outq *q;
	ssize_t n;

	log_flush(); /* a reply never comes before the events it caused */
	while ((q = c->out) != NULL) {
		if (q->r.fd >= 0 && q->off == 0) {
			union {
				struct cmsghdr h;
				char b[CMSG_SPACE(sizeof(int))];
			} cm;
			struct iovec iov = { q->r.text, q->r.len };
			struct msghdr mh;
			struct cmsghdr *h;

			memset(&mh, 0, sizeof(mh));
			memset(&cm, 0, sizeof(cm));
			mh.msg_iov = &iov;
			mh.msg_iovlen = 1;
			mh.msg_control = cm.b;
			mh.msg_controllen = sizeof(cm.b);
			h = CMSG_FIRSTHDR(&mh);
			h->cmsg_level = SOL_SOCKET;
			h->cmsg_type = SCM_RIGHTS;
			h->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(h), &q->r.fd, sizeof(int));
			n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
			if (n > 0) {
				(void)close(q->r.fd);
				q->r.fd = -1;
			}
		} else
			n = send(c->fd, q->r.text + q->off, q->r.len - q->off,
			    MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -1;
		}
		q->off += (size_t)n;
		c->nout -= (size_t)n;
		cconn_idle_arm(c); /* a reply read is not idle */
		if (q->off < q->r.len)
			return 0;
		c->out = q->next;
		if (c->out == NULL)
			c->out_tail = &c->out;
		control_reply_done(&q->r);
		free(q);
	}
	return 0;
}

/*
 * Move the descriptors that came with the bytes in[0..n] (one line and
 * its LF) to out; shift the offsets of the others past the line.
 */
static size_t
cconn_take_fds(struct cconn *c, size_t n, int *out)
{
	size_t i, k = 0, nout = 0;

	for (i = 0; i < c->nfds; i++) {
		if (c->fd_off[i] <= n) {
			out[nout++] = c->fds[i];
			continue;
		}
		c->fds[k] = c->fds[i];
		c->fd_off[k++] = c->fd_off[i] - (n + 1);
	}
	c->nfds = k;
	return nout;
}

/* May c's peer use the control socket under the configuration in force
 * (root is always allowed when none is; the broker's own user always)? */
static int
cconn_allowed(const struct cconn *c)
{
	return c->uid == geteuid() ||
	    control_peer_allowed(c->cs->ops->snapshot(c->cs->broker), c->uid,
		c->gid);
}

/* Restart c's idle clock. */
static void
cconn_idle_arm(struct cconn *c)
{
	unsigned ms = c->cs != NULL ? c->cs->idle_ms : CONTROL_IDLE_MS;
	struct timeval tv = { (time_t)(ms / 1000),
		(suseconds_t)(ms % 1000) * 1000 };

	(void)evtimer_add(c->idle, &tv);
}

/* Run complete lines while no check is in flight; then flush. */
static void
cconn_pump(struct cconn *c)
{
	struct control_server *cs = c->cs;
	int fds[CONTROL_FDS_MAX];
	size_t n, nfds;
	char *nl;
	int rc;

	while (!c->pending && !c->dead && cs != NULL && c->hold == 0 &&
	    (nl = memchr(c->in, '\n', c->nin)) != NULL) {
		n = (size_t)(nl - c->in);
		nfds = cconn_take_fds(c, n, fds);
		cconn_idle_arm(c);
		if (!cconn_allowed(c)) {
			/* No longer in control_uids or control_gids. */
			fds_close(fds, nfds);
			(void)reply_error("permission denied", "denied",
			    cconn_reply, c);
			c->eof = 1;
			c->nin = 0;
			break;
		}
		rc = control_dispatch_fds(cs->ops, cs->broker, c->in, n, fds,
		    nfds, server_reply, c);
		memmove(c->in, nl + 1, c->nin - n - 1);
		c->nin -= n + 1;
		if (rc == 1)
			c->pending = 1;
		else if (rc < 0)
			c->eof = 1;
	}
	if (c->hold != 0 && c->nin > 0)
		c->eof = 1; /* more after attach-listener: end the hold */
	if (!c->pending && c->nin > CONTROL_LINE_MAX) {
		(void)reply_error("line too long", "usage", cconn_reply, c);
		c->eof = 1;
		c->nin = 0;
	}
	if (cconn_flush(c) != 0) {
		cconn_free(c);
		return;
	}
	if (c->out != NULL)
		(void)event_add(c->wr, NULL);
	else if (c->eof && !c->pending) {
		cconn_free(c);
		return;
	}
	/* Read only with room and nothing in flight (one at a time); a
	 * hold reads to see it close. */
	if (!c->eof && !c->pending && (c->nin < sizeof(c->in) || c->hold))
		(void)event_add(c->rd, NULL);
	else
		(void)event_del(c->rd);
}

/*
 * Read into in[] with the descriptors that come along (CLOEXEC), each
 * noted with the offset of its byte. More than CONTROL_FDS_MAX waiting,
 * or a truncated set, fails the read (-1, EMSGSIZE): all are closed.
 */
static ssize_t
cconn_recv(struct cconn *c)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(CONTROL_FDS_MAX * sizeof(int))];
	} cm;
	struct iovec iov = { c->in + c->nin, sizeof(c->in) - c->nin };
	struct msghdr mh;
	struct cmsghdr *h;
	size_t i, k;
	ssize_t n;
	int fd, bad = 0;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.b;
	mh.msg_controllen = sizeof(cm.b);
	n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	for (h = CMSG_FIRSTHDR(&mh); h != NULL; h = CMSG_NXTHDR(&mh, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
			continue;
		k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < k; i++) {
			memcpy(&fd, CMSG_DATA(h) + i * sizeof(int),
			    sizeof(int));
			if (c->nfds == CONTROL_FDS_MAX || c->hold != 0) {
				(void)close(fd);
				bad = 1;
				continue;
			}
			c->fds[c->nfds] = fd;
			c->fd_off[c->nfds++] = c->nin;
		}
	}
	if (bad || (mh.msg_flags & MSG_CTRUNC)) {
		fds_close(c->fds, c->nfds);
		c->nfds = 0;
		errno = EMSGSIZE;
		return -1;
	}
	return n;
}

static void
cconn_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *c = arg;
	ssize_t n;

	n = cconn_recv(c);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0 && c->hold != 0) {
		/* A hold takes no more commands: end it. */
		cconn_free(c);
		return;
	}
	if (n <= 0) {
		/* EOF: answer what was received, then close. */
		c->eof = 1;
		if (n < 0) {
			cconn_free(c);
			return;
		}
	} else
		c->nin += (size_t)n;
	cconn_pump(c);
}

static void
cconn_write_cb(evutil_socket_t fd, short what, void *arg)
{
	cconn_pump(arg);
}

/* The check a connection had in flight finished; resume it. */
static void
cconn_check_resume(struct cconn *c)
{
	c->pending = 0;
	if (c->dead) {
		free(c);
		return;
	}
	cconn_idle_arm(c); /* from the end of the check */
	cconn_pump(c);
}

int
control_server_new(struct event_base *base, const struct control_ops *ops,
    void *broker, struct control_server **ret)
{
	struct control_server *cs;

	if ((cs = calloc(1, sizeof(*cs))) == NULL)
		return EGRESS_ERR_NOMEM;
	cs->base = base;
	cs->idle_ms = CONTROL_IDLE_MS;
	cs->ops = ops;
	cs->broker = broker;
	*ret = cs;
	return 0;
}

static void
refuse(int fd, const char *line)
{
	log_flush();
	(void)send(fd, line, strlen(line), MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)close(fd);
}

/*
 * The reply function handed to control_dispatch by the server wraps
 * cconn_reply so that a check completing later resumes its connection.
 */
static void
server_reply(void *arg, struct control_reply *r)
{
	struct cconn *c = arg;
	int was_pending = c->pending;

	cconn_reply(c, r);
	if (was_pending)
		cconn_check_resume(c);
}

/* No command for CONTROL_IDLE_MS and none in flight: close. */
static void
cconn_idle_cb(evutil_socket_t fd, short what, void *arg)
{
	struct cconn *c = arg;

	if (c->pending || c->hold != 0)
		return; /* re-armed by the next command */
	cconn_free(c);
}

int
control_server_accept(struct control_server *cs, int fd)
{
	struct ucred cred;
	socklen_t sl = sizeof(cred);
	struct cconn *c;
	int reserve;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &sl) != 0 ||
	    sl != sizeof(cred) ||
	    (cred.uid != geteuid() &&
		!control_peer_allowed(cs->ops->snapshot(cs->broker), cred.uid,
		    cred.gid))) {
		refuse(fd,
		    "{\"error\":\"permission denied\","
		    "\"code\":\"denied\"}\n");
		return EGRESS_ERR_DENIED;
	}
	reserve = cred.uid == 0 || cred.uid == geteuid() ?
	    CONTROL_CONNS_RESERVE :
	    0;
	if (cs->nconns >= CONTROL_CONNS_MAX + (size_t)reserve) {
		refuse(fd,
		    "{\"error\":\"too many control connections\","
		    "\"code\":\"unavailable\"}\n");
		return EGRESS_ERR_AGAIN;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		(void)close(fd);
		return EGRESS_ERR_NOMEM;
	}
	c->uid = cred.uid;
	c->gid = cred.gid;
	c->fd = fd;
	c->out_tail = &c->out;
	evutil_make_socket_nonblocking(fd);
	evutil_make_socket_closeonexec(fd);
	c->rd = event_new(cs->base, fd, EV_READ | EV_PERSIST, cconn_read_cb,
	    c);
	c->wr = event_new(cs->base, fd, EV_WRITE, cconn_write_cb, c);
	c->idle = evtimer_new(cs->base, cconn_idle_cb, c);
	if (c->rd == NULL || c->wr == NULL || c->idle == NULL ||
	    event_add(c->rd, NULL) != 0) {
		cconn_free(c);
		return EGRESS_ERR_NOMEM;
	}
	c->cs = cs;
	c->next = cs->conns;
	if (cs->conns != NULL)
		cs->conns->prev = c;
	cs->conns = c;
	cs->nconns++;
	cconn_idle_arm(c);
	return 0;
}

void
control_server_idle_ms(struct control_server *cs, unsigned ms)
{
	cs->idle_ms = ms;
}

size_t
control_server_count(const struct control_server *cs)
{
	return cs != NULL ? cs->nconns : 0;
}

void
control_server_free(struct control_server *cs)
{
	if (cs == NULL)
		return;
	while (cs->conns != NULL)
		// NOLINTNEXTLINE(clang-analyzer-unix.Malloc): it unlinks the head
		cconn_free(cs->conns);
	free(cs);
}
