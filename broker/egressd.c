/* SPDX-License-Identifier: ISC */
/*
 * egressd: the egress authority for plugin runtimes. It loads the
 * configuration (conf/), creates one Unix socket per configured instance
 * and the control socket (listen.c), serves plugin connections
 * (session.c) whose requests go through the pinned send path
 * (request.c), re-reads the configuration per request when a file
 * changed (confstate.c), and logs JSON lines (log.c). It also runs the
 * sidecar pieces: this host's addresses from netlink (netaddr.c), the
 * counters of `show metrics` (metrics.c), the control protocol on the
 * control socket (control.c, served through the control_ops below), NAT64
 * prefix discovery as a warning at start and after each reload
 * (nat64disc.c) and the service-manager notifications (notify.c). Signals via
 * libevent: SIGTERM/SIGINT drain and exit 0, SIGHUP re-reads now,
 * SIGUSR1 reopens the log file. `--check-config` validates the
 * configuration and every referenced manifest, prints each error with
 * file and line and exits 0 or 1, like `nginx -t`. docs/egressd.md and
 * docs/egressd.8 describe the daemon.
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/util.h>
#include <jansson.h>

#include <egress/error.h>

#include "broker/alisten.h"
#include "broker/broker.h"
#include "broker/confstate.h"
#include "broker/control.h"
#include "broker/listen.h"
#include "broker/log.h"
#include "broker/metrics.h"
#include "broker/metrics_http.h"
#include "broker/net/decide.h"
#include "broker/net/dial.h"
#include "broker/net/dns.h"
#include "broker/net/lease.h"
#include "broker/net/nat64disc.h"
#include "broker/net/netaddr.h"
#include "broker/net/share.h"
#include "broker/notify.h"
#include "broker/proxy.h"
#include "broker/proxy_port.h"
#include "broker/request.h"
#include "broker/session.h"
#include "broker/spin.h"
#include "conf/conf.h"
#include "policy/policy.h"

static struct broker broker;
static char *log_path_now;
static struct broker_dns *nat64_dns; /* held while nat64q runs */

/* A control `check`, decided exactly as a request is (decide.h). */
struct ctl_check {
	struct ctl_check *next, *prev;
	struct broker *b;
	struct confref *conf; /* the snapshot decided with */
	char instance[CONF_NAME_MAX + 1];
	struct policy_dest dest;
	struct broker_dns *dns; /* held while the lookup is out */
	control_check_done done;
	void *arg;
	struct decide decide;
};
static struct ctl_check *ctl_checks; /* in flight */

/* How often the configuration files are re-checked while idle. */
#define CONF_WATCH_MS 1000

/* The usage lines (the synopsis of docs/egressd.md and egressd(8)); full
 * adds the options and the exit status. */
static void
usage(FILE *f, int full)
{
	(void)fprintf(f,
	    "usage: egressd [-c FILE] [--foreground]\n"
	    "       egressd [-c FILE] --check-config [--strict]\n"
	    "       egressd --help\n"
	    "       egressd --version\n");
	if (!full)
		return;
	(void)fprintf(f,
	    "\n"
	    "  -c, --config FILE   the configuration (default: $EGRESSD_CONFIG, "
	    "else\n"
	    "                      %s)\n"
	    "  -f, --foreground    do not detach\n"
	    "  -t, --check-config  validate the configuration and its "
	    "manifests, print\n"
	    "                      errors and warnings as FILE:LINE: ..., "
	    "exit 0 or 1\n"
	    "      --strict        with --check-config: a warning (a refused "
	    "manifest)\n"
	    "                      fails too\n"
	    "  -h, --help          print this help and exit\n"
	    "  -V, --version       print the version and exit\n"
	    "\nExit status: 0 after SIGTERM/SIGINT or a passed check; 1 an "
	    "invalid\nconfiguration or a socket that cannot be created; 2 a "
	    "usage error.\nSee egressd(8).\n",
	    CONF_DEFAULT_PATH);
}

/*
 * Print one warning per refused manifest: the daemon serves without that
 * instance (every request of it is denied manifest-refused). Return how
 * many.
 */
static size_t
check_refused(const struct conf_snapshot *s)
{
	const struct conf_instance *ci;
	size_t i, n = 0;

	for (i = 0; i < s->ninstances; i++) {
		ci = &s->instances[i];
		if (ci->manifest != NULL)
			continue;
		(void)fprintf(stderr,
		    "%s:%d: warning: [plugins.entries.%s]: "
		    "manifest refused, the instance is served nothing: %s\n",
		    s->path, ci->line, ci->name,
		    ci->manifest_error != NULL ? ci->manifest_error :
						 "refused");
		n++;
	}
	return n;
}

static void
check_warn(void *arg, const char *msg)
{
	(void)fprintf(stderr, "%s\n", msg);
}

/*
 * Validate the configuration and every manifest, by the daemon's rule: a
 * configuration error (printed as FILE:LINE: ...) fails, a refused
 * manifest is a warning (the daemon serves the other instances), which
 * fails only when strict.
 */
static int
check_config(const char *path, int strict)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors errs = { 0, NULL };
	struct dial_tls *t = NULL;
	size_t bad = 0, warn;
	size_t i;
	int err;

	err = conf_load(path, &s, &errs);
	if (err != 0) {
		for (i = 0; i < errs.n; i++)
			(void)fprintf(stderr, "%s\n", errs.msgs[i]);
		if (errs.n == 0)
			(void)fprintf(stderr, "%s: %s\n", path,
			    egress_strerror(err));
		conf_errors_done(&errs);
		(void)fprintf(stderr,
		    "egressd: configuration %s test "
		    "failed\n",
		    path);
		return 1;
	}
	conf_errors_done(&errs);
	warn = check_refused(s);
	warn += confstate_carve_warnings(s, check_warn, NULL);
	if (dial_tls_new(s->ca_file, &t) != 0) {
		(void)fprintf(stderr,
		    "%s: [tls] ca_file: '%s' cannot be "
		    "loaded as PEM certificates\n",
		    path, s->ca_file != NULL ? s->ca_file : "(system store)");
		bad++;
	}
	dial_tls_free(t);
	conf_snapshot_free(s);
	if (bad > 0 || (strict && warn > 0)) {
		(void)fprintf(stderr,
		    "egressd: configuration %s test "
		    "failed%s\n",
		    path,
		    bad == 0 ? " (--strict: warnings "
			       "fail)" :
			       "");
		return 1;
	}
	(void)fprintf(stderr,
	    "egressd: configuration %s test is "
	    "successful (%zu warning%s)\n",
	    path, warn, warn == 1 ? "" : "s");
	return 0;
}

static void
apply_log_path(const char *p)
{
	if ((p == NULL && log_path_now == NULL) ||
	    (p != NULL && log_path_now != NULL &&
		strcmp(p, log_path_now) == 0))
		return;
	if (log_open(p) != 0)
		return; /* keep the old destination */
	free(log_path_now);
	log_path_now = p != NULL ? strdup(p) : NULL;
}

static void
log_simple(const char *event, const char *key, const char *val)
{
	json_t *o = json_pack("{s:s}", key, val);

	if (o != NULL)
		log_event(event, o);
}

/* ---- NAT64 discovery --------------------------------------------------- */

static void
nat64_done(void *arg, const struct nat64disc_result *res)
{
	struct broker *b = arg;
	json_t *o;

	b->nat64q = NULL;
	broker_dns_release(nat64_dns);
	nat64_dns = NULL;
	b->nat64 = *res;
	if (res->nundeclared == 0)
		return;
	/* Abnormal: a translator the classifier cannot see through. */
	o = json_pack("{s:s, s:s, s:s}", "status", "warning", "warning",
	    res->warning, "suggestion", res->suggestion);
	if (o != NULL)
		log_event("egress.nat64", o);
}

static void
nat64_stop(struct broker *b)
{
	nat64disc_cancel(b->nat64q);
	b->nat64q = NULL;
	broker_dns_release(nat64_dns);
	nat64_dns = NULL;
}

/*
 * Ask for ipv4only.arpa AAAA against s's declared prefixes. The last
 * outcome stays in b->nat64 until the new one arrives; without a lookup
 * it is cleared (nothing known).
 */
static void
nat64_start(struct broker *b, const struct conf_snapshot *s)
{
	nat64_stop(b);
	if ((nat64_dns = broker_dns_hold(b)) == NULL ||
	    nat64disc_start(broker_dns_resolver(nat64_dns), &s->nat64,
		nat64_done, b, &b->nat64q) != 0) {
		b->nat64q = NULL;
		broker_dns_release(nat64_dns);
		nat64_dns = NULL;
		memset(&b->nat64, 0, sizeof(b->nat64));
	}
}

/* ---- Control operations ------------------------------------------------ */

static const struct conf_snapshot *
ctl_snapshot(void *arg)
{
	struct broker *b = arg;

	return b->conf.cur != NULL ? b->conf.cur->snap : NULL;
}

static void
ctl_status(void *arg, struct control_status *st)
{
	struct broker *b = arg;
	time_t now = time(NULL);

	memset(st, 0, sizeof(*st));
	st->version = EGRESSD_VERSION;
	st->uptime_s = now > b->started ? (uint64_t)(now - b->started) : 0;
	st->config_path = b->conf.path;
	st->generation = b->conf.generation;
	st->loaded_unix = b->conf.loaded_unix;
	st->config_error = confstate_error(&b->conf);
	st->config_errors = (const char *const *)b->conf.errors;
	st->nconfig_errors = b->conf.nerrors;
	st->config_error_since = b->conf.broken_since_unix;
	st->config_watch = confwatch_describe(&b->conf.watch);
	st->pid = (int64_t)getpid();
	st->reloads = b->conf.reloads;
	st->reload_failures = b->conf.failures;
	st->connections = b->nsessions;
	st->requests = b->nrequests;
	st->leases = lease_total(b->leases);
	st->upstream_max = b->up_share != NULL ?
	    share_capacity(b->up_share) :
	    0;
	st->log_queued = log_queued(NULL);
	st->log_backlogs = log_backlogs();
	st->poll_hits = b->poll_hits;
	st->poll_us = b->poll_us;
	st->local = netaddr_addrs(b->netaddr, &st->nlocal);
	st->local_generation = netaddr_generation(b->netaddr);
	if (b->nat64.nundeclared > 0) {
		st->nat64_warning = b->nat64.warning;
		st->nat64_suggestion = b->nat64.suggestion;
	}
}

static unsigned
ctl_leases(void *arg, const char *instance)
{
	struct broker *b = arg;

	return lease_count(b->leases, instance);
}

static const struct metrics *
ctl_metrics(void *arg)
{
	struct broker *b = arg;

	return b->metrics;
}

static void
ctl_check_free(struct ctl_check *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else if (ctl_checks == c)
		ctl_checks = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	decide_cancel(&c->decide);
	broker_dns_release(c->dns);
	confref_unref(c->conf);
	free(c);
}

/* Deliver a verdict, or an error when there is none. */
static void
ctl_check_finish(struct ctl_check *c, int error, const struct decide_result *d)
{
	struct control_check_result res;

	memset(&res, 0, sizeof(res));
	res.error = error;
	if (error == 0 && d->invalid)
		res.error = EGRESS_ERR_INVALID;
	else if (error == 0) {
		res.allow = d->allow;
		res.reason = d->reason;
		if (d->allow) {
			res.addrs = d->verdict->addrs;
			res.naddrs = d->verdict->naddrs;
		}
		res.answers = d->answers;
		res.nanswers = d->nanswers;
	}
	c->done(c->arg, &res);
	ctl_check_free(c);
}

/* A deny decided before the policy was asked. */
static void
ctl_check_deny(struct ctl_check *c, const char *reason)
{
	struct decide_result d;

	memset(&d, 0, sizeof(d));
	d.reason = reason;
	ctl_check_finish(c, 0, &d);
}

/* The policy a request of that instance would decide with now (taken
 * again when the answers arrive, as a request does). */
static int
ctl_check_policy(void *arg, int answers, struct decide_policy *ret)
{
	struct ctl_check *c = arg;
	const struct conf_instance *ci;
	struct confref *now;

	if (answers) {
		if ((now = confstate_get(&c->b->conf)) == NULL)
			return -1;
		confref_unref(c->conf);
		c->conf = now;
	}
	ci = conf_instance_find(c->conf->snap, c->instance);
	ret->instance = ci != NULL ? &ci->policy : NULL;
	ret->nat64 = &c->conf->snap->nat64;
	return broker_own_addrs(c->b, ret);
}

static void
ctl_check_decided(void *arg, const struct decide_result *res)
{
	ctl_check_finish(arg, 0, res);
}

/* Parse a URL, or a bare HOST[:PORT] taken as https://HOST[:PORT]. */
static int
ctl_check_parse(const char *d, struct policy_dest *dest, int *transport)
{
	struct policy_err perr;

	*transport = POLICY_TRANSPORT_HTTP;
	if (strstr(d, "://") == NULL) {
		if (policy_authority_parse(d, strlen(d), 443, dest, &perr) !=
		    0)
			return -1;
		(void)snprintf(dest->scheme, sizeof(dest->scheme), "https");
		return 0;
	}
	if (policy_url_parse(d, strlen(d), dest, &perr) != 0)
		return -1;
	if (strcmp(dest->scheme, "ws") == 0 ||
	    strcmp(dest->scheme, "wss") == 0)
		*transport = POLICY_TRANSPORT_WEBSOCKET;
	return 0;
}

static int
ctl_check(void *arg, const char *instance, const char *destination,
    control_check_done done, void *darg)
{
	struct broker *b = arg;
	struct decide_lookup lk;
	struct ctl_check *c;
	int transport;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return EGRESS_ERR_NOMEM;
	c->b = b;
	c->done = done;
	c->arg = darg;
	c->next = ctl_checks;
	if (ctl_checks != NULL)
		ctl_checks->prev = c;
	ctl_checks = c;
	if (strlen(instance) > CONF_NAME_MAX) {
		ctl_check_deny(c,
		    policy_reason_str(POLICY_REASON_UNKNOWN_INSTANCE));
		return 0;
	}
	memcpy(c->instance, instance, strlen(instance) + 1);
	if (ctl_check_parse(destination, &c->dest, &transport) != 0) {
		ctl_check_deny(c,
		    policy_reason_str(POLICY_REASON_INVALID_DESTINATION));
		return 0;
	}
	/* The snapshot a request would decide with now. */
	if ((c->conf = confstate_get(&b->conf)) == NULL) {
		ctl_check_deny(c, "policy-unavailable");
		return 0;
	}
	/* The live resolver, held until the answer arrives. */
	memset(&lk, 0, sizeof(lk));
	c->dns = broker_dns_hold(b);
	lk.resolver = c->dns != NULL ? broker_dns_resolver(c->dns) : NULL;
	if (decide_run(&c->decide, transport, &c->dest, ctl_check_policy, c,
		&lk, ctl_check_decided, c))
		ctl_check_finish(c, 0, decide_result(&c->decide));
	return 0;
}

/* At exit: answer every check in flight with an error. */
static void
ctl_checks_cancel(void)
{
	while (ctl_checks != NULL)
		ctl_check_finish(ctl_checks, EGRESS_ERR_UNAVAILABLE, NULL);
}

static int
ctl_reload(void *arg)
{
	struct broker *b = arg;

	if (b->draining)
		return EGRESS_ERR_UNAVAILABLE;
	confstate_reload(&b->conf);
	return 0;
}

static int
ctl_attach(void *arg, const char *instance, int *ret_fd)
{
	struct broker *b = arg;
	int sv[2], err;

	if (b->conf.cur == NULL ||
	    conf_instance_find(b->conf.cur->snap, instance) == NULL)
		return EGRESS_ERR_NOT_FOUND;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return EGRESS_ERR_IO;
	if (evutil_make_socket_nonblocking(sv[0]) != 0) {
		(void)close(sv[0]);
		(void)close(sv[1]);
		return EGRESS_ERR_IO;
	}
	/* Served exactly like a connection on <instance>.sock. */
	err = session_accept(b, sv[0], instance);
	if (err != 0) {
		(void)close(sv[1]);
		return err;
	}
	*ret_fd = sv[1];
	return 0;
}

static int
ctl_attach_listener(void *arg, const char *instance, int *fds, size_t nfds,
    uint64_t *ret_hold, const char **reterr_msg)
{
	struct broker *b = arg;
	size_t i;

	if (b->conf.cur == NULL ||
	    conf_instance_find(b->conf.cur->snap, instance) == NULL ||
	    b->alisten == NULL) {
		for (i = 0; i < nfds; i++)
			(void)close(fds[i]);
		return EGRESS_ERR_NOT_FOUND;
	}
	return alisten_attach(b->alisten, instance, fds, nfds, ret_hold,
	    reterr_msg);
}

static void
ctl_detach_listener(void *arg, uint64_t hold)
{
	struct broker *b = arg;

	alisten_detach(b->alisten, hold, "the control connection closed");
}

static const struct control_ops ctl_ops = {
	.snapshot = ctl_snapshot,
	.status = ctl_status,
	.leases = ctl_leases,
	.metrics = ctl_metrics,
	.check = ctl_check,
	.reload = ctl_reload,
	.attach = ctl_attach,
	.attach_listener = ctl_attach_listener,
	.detach_listener = ctl_detach_listener,
};

/* ---- Scrape endpoint ---------------------------------------------------- */

static struct metrics_http *metrics_ep; /* [metrics] listen, or NULL */

static int
metrics_render(void *arg, char **ret_text, size_t *ret_len)
{
	return control_metrics_text(&ctl_ops, arg, ret_text, ret_len);
}

/*
 * Serve [metrics] listen of s: bind a changed address before the old one
 * is closed, so a failed re-bind keeps the endpoint that works (logged);
 * close it when the key is gone. Return 0 or the error of the bind.
 */
static int
metrics_apply(struct broker *b, const struct conf_snapshot *s)
{
	const char *want = s->metrics_listen;
	struct metrics_http *h = NULL;
	json_t *o;
	int err;

	if (metrics_ep == NULL ? want == NULL :
				 want != NULL &&
		    strcmp(metrics_http_listen(metrics_ep), want) == 0)
		return 0; /* unchanged */
	if (want != NULL &&
	    (err = metrics_http_new(b->base, want, metrics_render, b, &h)) !=
		0) {
		o = json_pack("{s:s, s:s, s:s, s:s}", "status", "error",
		    "what", "metrics endpoint not bound", "listen", want,
		    "error",
		    err == EGRESS_ERR_IO ? strerror(errno) :
					   egress_strerror(err));
		if (o != NULL)
			log_event("egress.metrics", o);
		return err;
	}
	metrics_http_free(metrics_ep);
	metrics_ep = h;
	o = json_pack("{s:s, s:o}", "status",
	    h != NULL ? "listening" : "closed", "listen",
	    want != NULL ? json_string(want) : json_null());
	if (o != NULL)
		log_event("egress.metrics", o);
	return 0;
}

/* ---- Configuration and sockets ----------------------------------------- */

/* What a reload met while a request was deciding leaves to the loop. */
static struct event *reload_follow_ev;

/*
 * What follows the snapshot and may close what is open: streams and
 * tunnels decided again, the instance, proxy and attached listeners (and
 * the connections accepted under old owners), the control socket, the
 * metrics endpoint, the NAT64 discovery.
 */
static void
reload_follow(struct broker *b, const struct conf_snapshot *s)
{
	/* Open streams and tunnels are decided again even while draining:
	 * a revoked grant must not last until the drain timeout. A broken
	 * configuration (s NULL) allows none of them. */
	(void)request_revoke_streams(b, s);
	(void)proxy_revoke_tunnels(b, s);
	if (s == NULL || b->draining)
		return;
	if (listen_control_open(b->listen, s) != 0) {
		const char *call;
		json_t *o;
		int e;

		listen_last_error(b->listen, &call, &e);
		o = json_pack("{s:s, s:s, s:s, s:s, s:s}", "status", "error",
		    "what", "control socket", "path", s->control_socket,
		    "call", call, "errno", strerror(e));
		if (o != NULL)
			log_event("egress.listen", o);
	}
	(void)listen_reconcile(b->listen, s);
	(void)proxy_ports_apply(b, s);
	alisten_reconcile(b->alisten, s);
	(void)metrics_apply(b, s);
	nat64_start(b, s);
}

static void
reload_follow_cb(evutil_socket_t fd, short what, void *arg)
{
	struct broker *b = arg;
	struct confref *now = confref_ref(b->conf.cur);

	(void)fd;
	(void)what;
	reload_follow(b, now != NULL ? now->snap : NULL);
	confref_unref(now);
}

/*
 * A new snapshot (or NULL: the files broke). The log destination, the
 * resolver and the TLS trust follow at once, so the request whose look
 * at the files found the change decides and connects under them. The
 * rest (reload_follow()) closes what the snapshot no longer allows; when
 * that request's look ran the reload (in_use), it is in the middle of
 * its work (a frame being handled, a connection coming up) and closing
 * streams, tunnels or sockets there could free the very objects on the
 * stack: it is applied from the loop, in the same turn, with the
 * snapshot in force then (so too for the idle re-check's look). A
 * reload from the loop itself (SIGHUP, the control socket) applies it at
 * once.
 */
static void
on_reload(void *arg, const struct conf_snapshot *s)
{
	struct broker *b = arg;

	if (s != NULL)
		apply_log_path(s->log_path);
	if (s != NULL && !b->draining)
		(void)broker_apply_conf(b, s);
	if (b->conf.in_use) {
		/* Never at once here; there is no event only before or
		 * after the loop, with nothing open to close. */
		if (reload_follow_ev != NULL)
			event_active(reload_follow_ev, EV_TIMEOUT, 0);
		return;
	}
	if (reload_follow_ev != NULL)
		(void)event_del(reload_follow_ev); /* this one supersedes it */
	reload_follow(b, s);
}

static int64_t
mono_us(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The spin bounds the current configuration asks for (0 when broken). */
static unsigned
busy_poll_us(const struct broker *b)
{
	return b->conf.cur != NULL ? b->conf.cur->snap->busy_poll_us : 0;
}

static unsigned
adaptive_poll_us(const struct broker *b)
{
	return b->conf.cur != NULL ? b->conf.cur->snap->adaptive_poll_us : 0;
}

/*
 * The event loop: event_base_loop() one iteration at a time, blocking,
 * and after the guest or an upstream made the broker work, polling
 * without sleeping (epoll_wait with no timeout) for as long as spin.h
 * says: [broker] busy_poll_us after a wait that found work, or
 * adaptive_poll_us while work follows work closely; never while idle.
 * The bounds are read from the current snapshot at every poll, so a
 * reload applies. The log lines an iteration made are written at its
 * end (log_hold()).
 * Return 0 when the loop was asked to exit, -1 on an error.
 */
static int
broker_loop(struct broker *b)
{
	struct spin sp = { 0 };
	unsigned long seen;
	int64_t since = 0, prev = 0, now = 0;
	unsigned budget;
	int r, polled, empty, timed;

	for (;;) {
		seen = b->activity;
		polled = empty = 0;
		while ((budget = spin_budget(&sp, busy_poll_us(b),
			    adaptive_poll_us(b))) != 0) {
			if (!polled) {
				polled = 1;
				prev = since = mono_us();
			}
			/* 1: no events left at all, as dispatch returns */
			r = event_base_loop(b->base, EVLOOP_NONBLOCK);
			log_flush();
			now = mono_us();
			if (r != 0 || event_base_got_exit(b->base) ||
			    event_base_got_break(b->base)) {
				if (b->activity == seen)
					b->poll_us += (uint64_t)(now - prev);
				return r < 0 ? -1 : 0;
			}
			if (b->activity != seen) {
				/* Work a sleep would have waited for (not
				 * work that was there already), handled. */
				if (empty)
					b->poll_hits++;
				seen = b->activity;
				since = now;
				empty = 0;
			} else {
				/* Polling time: a pass that found nothing. */
				b->poll_us += (uint64_t)(now - prev);
				empty = 1;
				if (now - since >= budget) {
					spin_missed(&sp);
					break;
				}
			}
			prev = now;
		}
		/* The clock only when the adaptive poll needs the wait. */
		timed = adaptive_poll_us(b) != 0 && busy_poll_us(b) == 0;
		prev = timed ? mono_us() : 0;
		r = event_base_loop(b->base, EVLOOP_ONCE);
		log_flush();
		if (r != 0)
			return r < 0 ? -1 : 0;
		if (event_base_got_exit(b->base) ||
		    event_base_got_break(b->base))
			return 0;
		spin_woke(&sp, timed ? mono_us() - prev : -1,
		    b->activity != seen, adaptive_poll_us(b));
	}
}

static int
broker_run(struct broker *b)
{
	int r;

	log_hold(1);
	r = broker_loop(b);
	log_hold(0);
	return r;
}

static void
on_accept(void *arg, int fd, const char *instance)
{
	(void)session_accept(arg, fd, instance);
}

static void
on_revoke(void *arg, const char *instance)
{
	json_t *o;

	o = json_pack("{s:s, s:s, s:s}", "status", "revoked", "what",
	    "socket owner or group changed: connections closed", "instance",
	    instance);
	if (o != NULL)
		log_event("egress.listen", o);
	session_revoke_instance(arg, instance);
	proxy_revoke_instance(arg, instance);
}

static void
on_control(void *arg, int fd)
{
	struct broker *b = arg;

	(void)control_server_accept(b->control, fd);
}

static void
drain_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct broker *b = arg;

	proxy_free_all(b);
	session_free_all(b);
	(void)event_base_loopexit(b->base, NULL);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct broker *b = arg;
	struct timeval tv;
	unsigned ms;

	switch (sig) {
	case SIGHUP:
		if (!b->draining)
			confstate_reload(&b->conf);
		return;
	case SIGUSR1:
		(void)log_reopen();
		return;
	case SIGTERM:
	case SIGINT:
		if (b->draining)
			return;
		b->draining = 1;
		/* The once-a-second check stops: every look stats again. */
		confstate_unwatch(&b->conf);
		log_simple("egress.stop", "status", "draining");
		(void)notify_stopping();
		listen_stop(b->listen);
		proxy_ports_free(b);
		(void)proxy_drain_all(b);
		/* Open websockets would last until the drain timeout: they
		 * are closed now, going away (1001), both ways. */
		(void)request_ws_close_all(b, 1001, "draining");
		if (session_drain_all(b) == 0) {
			(void)event_base_loopexit(b->base, NULL);
			return;
		}
		ms = b->conf.cur != NULL ?
		    b->conf.cur->snap->drain_timeout_ms :
		    5000;
		tv.tv_sec = ms / 1000;
		tv.tv_usec = (ms % 1000) * 1000;
		b->drain_timer = evtimer_new(b->base, drain_timeout_cb, b);
		if (b->drain_timer == NULL ||
		    evtimer_add(b->drain_timer, &tv) != 0)
			drain_timeout_cb(-1, 0, b);
		return;
	}
}

static void
make_id_prefix(struct broker *b)
{
	unsigned char r[4] = { 0 };

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		(void)memcpy(r, &(pid_t){ getpid() }, sizeof(r));
	(void)snprintf(b->id_prefix, sizeof(b->id_prefix), "%02x%02x%02x%02x",
	    r[0], r[1], r[2], r[3]);
}

struct args {
	const char *path; /* the configuration, as given */
	int foreground, check, strict;
};

/* Parse the command line. Return -1 to go on, else the exit status. */
static int
parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "check-config", no_argument, NULL, 't' },
		{ "strict", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *arg_path = NULL;
	int c;

	memset(a, 0, sizeof(*a));
	while ((c = getopt_long(argc, argv, "c:fthV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			arg_path = optarg;
			break;
		case 'f':
			a->foreground = 1;
			break;
		case 't':
			a->check = 1;
			break;
		case 's':
			a->strict = 1;
			break;
		case 'h':
			usage(stdout, 1);
			return 0;
		case 'V':
			(void)printf("egressd %s\n", EGRESSD_VERSION);
			return 0;
		default:
			usage(stderr, 0);
			return 2;
		}
	}
	if (optind != argc || (a->strict && !a->check)) {
		if (optind != argc)
			(void)fprintf(stderr,
			    "egressd: unexpected argument "
			    "'%s'\n",
			    argv[optind]);
		else
			(void)fprintf(stderr,
			    "egressd: --strict needs "
			    "--check-config\n");
		usage(stderr, 0);
		return 2;
	}
	a->path = conf_default_path(arg_path);
	return -1;
}

/*
 * The configuration path made absolute against the working folder, so
 * that re-reading it still works after daemon() moved to / (every path in
 * the file is resolved against its folder). Return it (malloc'd), or NULL
 * with the reason printed.
 */
static char *
absolute_config_path(const char *path)
{
	char cwd[PATH_MAX], *abs = NULL;

	if (path[0] == '/')
		abs = strdup(path);
	else if (getcwd(cwd, sizeof(cwd)) == NULL) {
		(void)fprintf(stderr,
		    "egressd: %s: getcwd: %s (give -c an "
		    "absolute path)\n",
		    path, strerror(errno));
		return NULL;
	} else if (asprintf(&abs, "%s%s%s", cwd,
		       strcmp(cwd, "/") == 0 ? "" : "/", path) < 0)
		abs = NULL;
	if (abs == NULL)
		(void)fprintf(stderr, "egressd: out of memory\n");
	return abs;
}

/* Load the first snapshot; on failure print every error. Return 0 or 1. */
static int
load_first(struct broker *b, const char *path)
{
	struct conf_errors errs = { 0, NULL };
	size_t i;
	int err;

	err = confstate_init(&b->conf, path, on_reload, b, &errs);
	if (err == 0)
		return 0;
	for (i = 0; i < errs.n; i++)
		(void)fprintf(stderr, "%s\n", errs.msgs[i]);
	if (errs.n == 0)
		(void)fprintf(stderr, "egressd: %s: %s\n", path,
		    egress_strerror(err));
	conf_errors_done(&errs);
	return 1;
}

/* Say which system call failed on the control socket, and why. */
static void
control_open_failed(const struct broker *b, const struct conf_snapshot *s)
{
	const char *call;
	int e;

	listen_last_error(b->listen, &call, &e);
	(void)fprintf(stderr,
	    "egressd: cannot create the control socket %s "
	    "([broker] control_socket in %s): %s: %s\n",
	    s->control_socket, s->path, call, strerror(e));
}

/* egress.start, with the instances whose manifest is refused and the
 * configuration's warnings (none: no field). */
static void
log_start(const struct conf_snapshot *s)
{
	json_t *o = json_pack("{s:s, s:s, s:I, s:o*, s:o*}", "status",
	    "started", "version", EGRESSD_VERSION, "instances",
	    (json_int_t)s->ninstances, "refused", confstate_refused_json(s),
	    "warnings", confstate_warnings_json(s));

	if (o != NULL)
		log_event("egress.start", o);
}

/* A file that broke or was fixed is noticed within a tick, idle or not,
 * and so is a change the watch over the files cannot see. */
static void
conf_watch_cb(evutil_socket_t fd, short what, void *arg)
{
	struct broker *b = arg;

	if (!b->draining)
		confstate_poll(&b->conf);
}

/* Handle the signals and start the once-a-second re-check. Return 0 or
 * -1. */
static int
events_add(struct broker *b, struct event **evs, size_t n)
{
	static const int signums[4] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1 };
	const struct timeval tv = { CONF_WATCH_MS / 1000,
		(CONF_WATCH_MS % 1000) * 1000 };
	size_t i;

	assert(n == 5);
	for (i = 0; i < 4; i++) {
		evs[i] = evsignal_new(b->base, signums[i], on_signal, b);
		if (evs[i] == NULL || evsignal_add(evs[i], NULL) != 0) {
			(void)fprintf(stderr,
			    "egressd: cannot handle "
			    "signals\n");
			return -1;
		}
	}
	evs[4] = event_new(b->base, -1, EV_PERSIST, conf_watch_cb, b);
	if (evs[4] == NULL || event_add(evs[4], &tv) != 0) {
		(void)fprintf(stderr,
		    "egressd: cannot start the configuration "
		    "timer\n");
		return -1;
	}
	return 0;
}

/* The own-address set changed, became unknown (with the cause), or is
 * known again: say so. */
static void
host_addresses_changed(void *arg, const struct netaddr *na)
{
	json_t *o;

	if (netaddr_is_stale(na))
		o = json_pack("{s:s, s:s, s:s, s:I}", "status", "error",
		    "what",
		    "this host's addresses could not be re-read; every "
		    "decision is policy-unavailable until they are",
		    "error", egress_strerror(netaddr_last_error(na)), "errors",
		    (json_int_t)netaddr_errors(na));
	else
		o = json_pack("{s:s, s:I, s:I}", "status", "ok", "generation",
		    (json_int_t)netaddr_generation(na), "local_routes",
		    (json_int_t)netaddr_nets_count(na));
	if (o != NULL)
		log_event("egress.netaddr", o);
}

/*
 * Every address this host delivers locally, from netlink. Without it the
 * set is unknown and every decision is policy-unavailable: said loudly
 * here, once, with the cause.
 */
static void
host_addresses_start(struct broker *b)
{
	int err;

	err = netaddr_new(b->base, host_addresses_changed, b, &b->netaddr);
	if (err != 0) {
		json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "status",
		    "error", "what",
		    "cannot read this host's addresses and local routes "
		    "(netlink NETLINK_ROUTE unavailable); every decision is "
		    "policy-unavailable",
		    "error", egress_strerror(err), "fix",
		    "allow AF_NETLINK (systemd RestrictAddressFamilies=) and "
		    "restart egressd");

		b->netaddr = NULL;
		if (o != NULL)
			log_event("egress.netaddr", o);
	}
}

/* Stop serving and free everything main() set up, in order. */
static void
daemon_shutdown(struct broker *b, struct event **sigs, size_t nsigs)
{
	size_t i;

	metrics_http_free(metrics_ep);
	metrics_ep = NULL;
	listen_free(b->listen);
	b->listen = NULL;
	proxy_ports_free(b);
	proxy_free_all(b);
	session_free_all(b);
	control_server_free(b->control);
	b->control = NULL;
	alisten_free(b->alisten);
	b->alisten = NULL;
	ctl_checks_cancel(); /* frees the connections they held */
	nat64_stop(b);
	for (i = 0; i < nsigs; i++)
		if (sigs[i] != NULL)
			event_free(sigs[i]);
	if (b->drain_timer != NULL)
		event_free(b->drain_timer);
	if (reload_follow_ev != NULL)
		event_free(reload_follow_ev);
	reload_follow_ev = NULL;
	netaddr_free(b->netaddr);
	b->netaddr = NULL;
	broker_release(b);
	if (b->base != NULL) {
		/* Run the deferred frees (resolvers, upstream buffers). */
		(void)event_base_loop(b->base, EVLOOP_NONBLOCK);
		log_detach(); /* writes what is queued, blocking */
		event_base_free(b->base);
	}
	metrics_free(b->metrics);
	b->metrics = NULL;
	confstate_done(&b->conf);
	log_close();
}

int
main(int argc, char **argv)
{
	struct broker *b = &broker;
	struct event *sigs[5] = { NULL, NULL, NULL, NULL, NULL };
	const struct conf_snapshot *s;
	struct args a;
	char *path = NULL;
	int rc = 1;

	if ((rc = parse_args(argc, argv, &a)) >= 0)
		return rc;
	if (a.check)
		return check_config(a.path, a.strict);
	/* A private key is the broker's secret: another user may not own
	 * it (a root broker could read it anyway; so could its owner). Not
	 * in --check-config, which may run as another user than the
	 * broker's (egressctl does not check it either). */
	conf_key_owner_require(geteuid());
	rc = 1;
	if ((path = absolute_config_path(a.path)) == NULL)
		return 1;

	(void)signal(SIGPIPE, SIG_IGN);
	memset(b, 0, sizeof(*b));
	make_id_prefix(b);
	if (load_first(b, path) != 0) {
		free(path);
		return 1;
	}
	s = b->conf.cur->snap;
	if (s->log_path != NULL) {
		if (log_open(s->log_path) != 0) {
			(void)fprintf(stderr, "egressd: %s: %s\n", s->log_path,
			    strerror(errno));
			goto out;
		}
		log_path_now = strdup(s->log_path);
	}
	b->started = time(NULL);
	if ((b->leases = lease_table_new()) == NULL ||
	    (b->metrics = metrics_new()) == NULL ||
	    (b->base = broker_base_new()) == NULL ||
	    (reload_follow_ev = event_new(b->base, -1, 0, reload_follow_cb,
		 b)) == NULL) {
		(void)fprintf(stderr, "egressd: cannot create event base\n");
		goto out;
	}
	/* A log destination that can block (a pipe, journald's socket) is
	 * written without blocking, in fair queues per instance. */
	(void)log_attach(b->base);
	host_addresses_start(b);
	if (broker_apply_conf(b, s) != 0 && b->dns == NULL) {
		(void)fprintf(stderr, "egressd: cannot create the resolver\n");
		goto out;
	}
	if (control_server_new(b->base, &ctl_ops, b, &b->control) != 0 ||
	    listen_new(b->base, on_accept, on_control, b, &b->listen) != 0 ||
	    alisten_new(b->base, on_accept, b, &b->alisten) != 0)
		goto out;
	listen_set_revoke_cb(b->listen, on_revoke);
	if (listen_control_open(b->listen, s) != 0) {
		control_open_failed(b, s);
		goto out;
	}
	if (listen_reconcile(b->listen, s) != 0) {
		(void)fprintf(stderr,
		    "egressd: cannot create every instance "
		    "socket (see the log)\n");
		goto out;
	}
	if (proxy_ports_apply(b, s) != 0) {
		(void)fprintf(stderr,
		    "egressd: cannot bind every proxy_listen address "
		    "(see the log)\n");
		goto out;
	}
	if (s->metrics_listen != NULL && metrics_apply(b, s) != 0) {
		(void)fprintf(stderr,
		    "egressd: [metrics] listen %s: cannot "
		    "serve it (see the log)\n",
		    s->metrics_listen);
		goto out;
	}
	if (events_add(b, sigs, 5) != 0)
		goto out;
	if (!a.foreground &&
	    (daemon(0, s->log_path != NULL ? 0 : 1) != 0 ||
		event_reinit(b->base) != 0)) {
		(void)fprintf(stderr, "egressd: daemon: %s\n",
		    strerror(errno));
		goto out;
	}
	log_start(s);
	nat64_start(b, s);
	(void)notify_ready();
	if (broker_run(b) < 0)
		goto out;
	log_simple("egress.stop", "status", "stopped");
	rc = 0;
out:
	daemon_shutdown(b, sigs, 5);
	free(log_path_now);
	free(path);
	return rc;
}
