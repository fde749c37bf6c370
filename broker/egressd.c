/* SPDX-License-Identifier: ISC */
/*
 * egressd: the egress authority for plugin runtimes. It loads the
 * configuration (conf/), creates one Unix socket per configured instance
 * and the control socket (listen.c), serves plugin connections
 * (session.c) whose requests go through the pinned send path
 * (request.c), re-reads the configuration per request when a file
 * changed (confstate.c), and logs JSON lines (log.c). Signals via
 * libevent: SIGTERM/SIGINT drain and exit 0, SIGHUP re-reads now,
 * SIGUSR1 reopens the log file. `--check-config` validates the
 * configuration and every referenced manifest, prints each error with
 * file and line and exits 0 or 1, like `nginx -t`. docs/egressd.md and
 * docs/egressd.8 describe the daemon.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>
#include <systemd/sd-daemon.h>

#include <egress/error.h>

#include "broker/confstate.h"
#include "broker/dial.h"
#include "broker/lease.h"
#include "broker/listen.h"
#include "broker/log.h"
#include "broker/request.h"
#include "broker/session.h"
#include "conf/conf.h"

static struct broker broker;
static char *log_path_now;

static void
usage(FILE *f)
{
	(void)fprintf(f,
	    "usage: egressd [-c FILE] [--foreground] [--check-config]\n");
}

/* Validate the configuration and every manifest; print file:line errors. */
static int
check_config(const char *path)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors errs = { 0, NULL };
	struct dial_tls *t = NULL;
	size_t i, bad = 0;
	int err;

	err = conf_load(path, &s, &errs);
	if (err != 0) {
		for (i = 0; i < errs.n; i++)
			(void)fprintf(stderr, "%s\n", errs.msgs[i]);
		if (errs.n == 0)
			(void)fprintf(stderr, "%s: %s\n", path,
			    egress_strerror(err));
		conf_errors_done(&errs);
		(void)fprintf(stderr, "egressd: configuration %s test "
		    "failed\n", path);
		return 1;
	}
	conf_errors_done(&errs);
	for (i = 0; i < s->ninstances; i++) {
		if (s->instances[i].manifest_error == NULL)
			continue;
		(void)fprintf(stderr, "%s\n", s->instances[i].manifest_error);
		bad++;
	}
	if (dial_tls_new(s->ca_file, &t) != 0) {
		(void)fprintf(stderr, "%s: [tls] ca_file: '%s' cannot be "
		    "loaded as PEM certificates\n", path,
		    s->ca_file != NULL ? s->ca_file : "(system store)");
		bad++;
	}
	dial_tls_free(t);
	conf_snapshot_free(s);
	if (bad > 0) {
		(void)fprintf(stderr, "egressd: configuration %s test "
		    "failed\n", path);
		return 1;
	}
	(void)fprintf(stderr, "egressd: configuration %s test is "
	    "successful\n", path);
	return 0;
}

static void
apply_log_path(const char *p)
{
	if ((p == NULL && log_path_now == NULL) ||
	    (p != NULL && log_path_now != NULL && strcmp(p, log_path_now) == 0))
		return;
	if (log_open(p) != 0)
		return;		/* keep the old destination */
	free(log_path_now);
	log_path_now = p != NULL ? strdup(p) : NULL;
}

static void
on_reload(void *arg, const struct conf_snapshot *s)
{
	struct broker *b = arg;

	apply_log_path(s->log_path);
	if (b->draining)
		return;
	(void)broker_apply_conf(b, s);
	if (listen_control_open(b->listen, s->control_socket) != 0)
		(void)0;	/* logged below by reconcile's caller */
	(void)listen_reconcile(b->listen, s);
}

static void
on_accept(void *arg, int fd, const char *instance)
{
	(void)session_accept(arg, fd, instance);
}

static void
log_simple(const char *event, const char *key, const char *val)
{
	json_t *o = json_pack("{s:s}", key, val);

	if (o != NULL)
		log_event(event, o);
}

static void
drain_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct broker *b = arg;

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
		log_simple("egress.stop", "status", "draining");
		listen_stop(b->listen);
		if (session_drain_all(b) == 0) {
			(void)event_base_loopexit(b->base, NULL);
			return;
		}
		ms = b->conf.cur != NULL ? b->conf.cur->snap->drain_timeout_ms :
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
	(void)snprintf(b->id_prefix, sizeof(b->id_prefix),
	    "%02x%02x%02x%02x", r[0], r[1], r[2], r[3]);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "check-config", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct broker *b = &broker;
	struct conf_errors errs = { 0, NULL };
	struct event *sigs[4] = { NULL, NULL, NULL, NULL };
	static const int signums[4] = { SIGTERM, SIGINT, SIGHUP, SIGUSR1 };
	const struct conf_snapshot *s;
	const char *arg_path = NULL, *path;
	int c, foreground = 0, check = 0, err, rc = 1;
	size_t i;

	while ((c = getopt_long(argc, argv, "c:fthV", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			arg_path = optarg;
			break;
		case 'f':
			foreground = 1;
			break;
		case 't':
			check = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			(void)printf("egressd %s\n", EGRESSD_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	path = conf_default_path(arg_path);
	if (check)
		return check_config(path);

	(void)signal(SIGPIPE, SIG_IGN);
	memset(b, 0, sizeof(*b));
	make_id_prefix(b);
	err = confstate_init(&b->conf, path, on_reload, b, &errs);
	if (err != 0) {
		for (i = 0; i < errs.n; i++)
			(void)fprintf(stderr, "%s\n", errs.msgs[i]);
		if (errs.n == 0)
			(void)fprintf(stderr, "egressd: %s: %s\n", path,
			    egress_strerror(err));
		conf_errors_done(&errs);
		return 1;
	}
	s = b->conf.cur->snap;
	if (s->log_path != NULL) {
		if (log_open(s->log_path) != 0) {
			(void)fprintf(stderr, "egressd: %s: %s\n",
			    s->log_path, strerror(errno));
			goto out;
		}
		log_path_now = strdup(s->log_path);
	}
	if ((b->leases = lease_table_new()) == NULL ||
	    (b->base = event_base_new()) == NULL) {
		(void)fprintf(stderr, "egressd: cannot create event base\n");
		goto out;
	}
	if (broker_apply_conf(b, s) != 0 && b->dns == NULL) {
		(void)fprintf(stderr, "egressd: cannot create the resolver\n");
		goto out;
	}
	if (listen_new(b->base, on_accept, b, &b->listen) != 0)
		goto out;
	err = listen_control_open(b->listen, s->control_socket);
	if (err != 0) {
		(void)fprintf(stderr, "egressd: %s: cannot create the control "
		    "socket: %s\n", s->control_socket, egress_strerror(err));
		goto out;
	}
	if (listen_reconcile(b->listen, s) != 0) {
		(void)fprintf(stderr, "egressd: cannot create every instance "
		    "socket (see the log)\n");
		goto out;
	}
	for (i = 0; i < 4; i++) {
		sigs[i] = evsignal_new(b->base, signums[i], on_signal, b);
		if (sigs[i] == NULL || evsignal_add(sigs[i], NULL) != 0) {
			(void)fprintf(stderr, "egressd: cannot handle "
			    "signals\n");
			goto out;
		}
	}
	if (!foreground && daemon(0, s->log_path != NULL ? 0 : 1) != 0) {
		(void)fprintf(stderr, "egressd: daemon: %s\n",
		    strerror(errno));
		goto out;
	}
	{
		json_t *o = json_pack("{s:s, s:s, s:I}", "status", "started",
		    "version", EGRESSD_VERSION, "instances",
		    (json_int_t)s->ninstances);

		if (o != NULL)
			log_event("egress.start", o);
	}
	(void)sd_notify(0, "READY=1");
	if (event_base_dispatch(b->base) < 0)
		goto out;
	log_simple("egress.stop", "status", "stopped");
	rc = 0;
out:
	listen_free(b->listen);
	b->listen = NULL;
	session_free_all(b);
	for (i = 0; i < 4; i++)
		if (sigs[i] != NULL)
			event_free(sigs[i]);
	if (b->drain_timer != NULL)
		event_free(b->drain_timer);
	broker_release(b);
	confstate_done(&b->conf);
	if (b->base != NULL)
		event_base_free(b->base);
	log_close();
	free(log_path_now);
	return rc;
}
