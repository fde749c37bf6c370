/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/control and broker/metrics: every command's reply
 * over a fake broker (the example configuration, fixed counters), errors
 * for malformed lines, the effective reach in `show grants`, a check that
 * completes later, the SO_PEERCRED rule, and the connection server over a
 * socketpair, including the fd an `attach` reply carries by SCM_RIGHTS.
 */
#include <sys/socket.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <egress/error.h>
#include <event2/event.h>
#include <jansson.h>

#include "broker/broker.h"
#include "broker/control.h"
#include "broker/log.h"
#include "broker/metrics.h"
#include "conf/conf.h"

struct fake {
	struct conf_snapshot *snap;
	struct metrics *m;
	int reloads;
	int reload_err;
	int async; /* check completes later */
	control_check_done done;
	void *done_arg;
	int attach_peer;    /* our end of the last attach */
	size_t listen_nfds; /* descriptors of the last attach-listener */
	uint64_t detached;  /* the last hold ended */
	int log_reload;	    /* reload logs an event */
};

static struct fake F;

static const struct conf_snapshot *
f_snapshot(void *b)
{
	return ((struct fake *)b)->snap;
}

static void
f_status(void *b, struct control_status *st)
{
	static const struct policy_addr local[1] = { { 4, { 127, 0, 0, 1 } } };

	st->version = "0.1.0";
	st->uptime_s = 42;
	st->config_path = "/etc/egressd/egressd.ini";
	st->generation = 3;
	st->loaded_unix = 86400;
	st->connections = 5;
	st->leases = 2;
	st->local = local;
	st->nlocal = 1;
	st->local_generation = 7;
	st->nat64_warning = "ipv4only.arpa answers in 2001:db8:99::/96";
	st->config_error = ((struct fake *)b)->reload_err ?
	    "egressd.ini:3: [broker] bogus: unknown key" :
	    NULL;
}

static unsigned
f_leases(void *b, const char *instance)
{
	return strcmp(instance, "weather") == 0 ? 2 : 0;
}

static const struct metrics *
f_metrics(void *b)
{
	return ((struct fake *)b)->m;
}

static void
f_check_finish(struct fake *f)
{
	struct control_check_result r;
	struct policy_addr a = { 4, { 93, 184, 216, 34 } };

	memset(&r, 0, sizeof(r));
	r.allow = 1;
	r.reason = "allow";
	r.addrs = &a;
	r.naddrs = 1;
	r.answers = &a;
	r.nanswers = 1;
	f->done(f->done_arg, &r);
}

static int
f_check(void *b, const char *instance, const char *dest,
    control_check_done done, void *arg)
{
	struct fake *f = b;
	struct control_check_result r;

	f->done = done;
	f->done_arg = arg;
	if (strcmp(dest, "http://fail.example/") == 0)
		return EGRESS_ERR_UNAVAILABLE;
	if (f->async)
		return 0;
	if (strcmp(dest, "http://10.0.0.7/") == 0) {
		memset(&r, 0, sizeof(r));
		r.reason = "private-address";
		done(arg, &r);
		return 0;
	}
	f_check_finish(f);
	return 0;
}

static int
f_reload(void *b)
{
	((struct fake *)b)->reloads++;
	if (((struct fake *)b)->log_reload)
		log_event("egress.test",
		    json_pack("{s:s}", "what", "reloaded"));
	return 0;
}

static int
f_attach(void *b, const char *instance, int *ret_fd)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return EGRESS_ERR_IO;
	((struct fake *)b)->attach_peer = sv[0];
	*ret_fd = sv[1];
	return 0;
}

static int
f_attach_listener(void *b, const char *instance, int *fds, size_t nfds,
    uint64_t *ret_hold, const char **reterr_msg)
{
	size_t i;

	((struct fake *)b)->listen_nfds = nfds;
	for (i = 0; i < nfds; i++)
		(void)close(fds[i]);
	*ret_hold = 7;
	return 0;
}

static void
f_detach_listener(void *b, uint64_t hold)
{
	((struct fake *)b)->detached = hold;
}

static const struct control_ops fake_ops = {
	f_snapshot,
	f_status,
	f_leases,
	f_metrics,
	f_check,
	f_reload,
	f_attach,
	f_attach_listener,
	f_detach_listener,
};

/* Replies collected by collect(). */
static char got[65536];
static size_t ngot;
static int got_fd = -1;
static int nreplies;

static void
collect(void *arg, struct control_reply *r)
{
	if (ngot + r->len < sizeof(got)) {
		memcpy(got + ngot, r->text, r->len);
		ngot += r->len;
		got[ngot] = '\0';
	}
	if (r->fd >= 0) {
		got_fd = r->fd;
		r->fd = -1; /* taken */
	}
	nreplies++;
}

static void
setup(void)
{
	struct conf_errors errs = { 0, NULL };

	memset(&F, 0, sizeof(F));
	F.attach_peer = -1;
	cr_assert_eq(conf_load(SRCDIR "/examples/egressd.ini", &F.snap, &errs),
	    0, "example configuration: %s", errs.n ? errs.msgs[0] : "?");
	F.m = metrics_new();
	cr_assert(F.m != NULL);
	metrics_decision(F.m, "weather", 1, NULL, 300);
	metrics_decision(F.m, "weather", 1, NULL, 300);
	metrics_decision(F.m, "weather", 0, "private-address", 3000000);
	metrics_bytes(F.m, "weather", 1000, 10);
	metrics_dns(F.m, "ok", 1200);
	metrics_upstream_error(F.m, "tls-failed");
	metrics_connect(F.m, 800);
	ngot = 0;
	got[0] = '\0';
	got_fd = -1;
	nreplies = 0;
}

static void
teardown(void)
{
	conf_snapshot_free(F.snap);
	metrics_free(F.m);
	if (got_fd >= 0)
		(void)close(got_fd);
	if (F.attach_peer >= 0)
		(void)close(F.attach_peer);
}

static int
run(const char *line)
{
	ngot = 0;
	got[0] = '\0';
	nreplies = 0;
	return control_dispatch(&fake_ops, &F, line, strlen(line), collect,
	    NULL);
}

struct cmd_case {
	char line[128];
	char want[256];	   /* substring of the reply */
	char unwanted[64]; /* must not appear ("" for none) */
};

static struct cmd_case cmd_cases[] = {
	{ "show status", "\"uptime_s\":42", "\"error\":\"" },
	{ "show status",
	    "\"config\":{\"path\":\"/etc/egressd/egressd.ini\","
	    "\"generation\":3,\"loaded_at\":\"1970-01-02T00:00:00Z\","
	    "\"error\":null",
	    "" },
	{ "show status", "\"instances\":3,\"connections\":5", "" },
	{ "show status",
	    "\"local_addresses\":{\"generation\":7,"
	    "\"addresses\":[\"127.0.0.1\"]}",
	    "" },
	{ "show status", "\"warning\":\"ipv4only.arpa answers in", "" },
	{ "show status\r", "\"uptime_s\":42", "" },
	{ "  show\t status  ", "\"uptime_s\":42", "" },
	{ "show instances", "{\"name\":\"gitea\"", "" },
	{ "show instances",
	    "\"name\":\"weather\",\"plugin\":\"weather\","
	    "\"version\":\"1.4.0\",\"manifest\":\"ok\"",
	    "" },
	{ "show instances",
	    "\"leases\":2,\"budget\":16,\"allowed\":2,"
	    "\"denied\":1,\"bytes_in\":1000,\"bytes_out\":10",
	    "" },
	{ "show instance weather",
	    "\"denied_by_reason\":"
	    "{\"private-address\":1}",
	    "" },
	{ "show instance weather", "\"permissions\":[\"http_client\"]", "" },
	{ "show instance weather",
	    "\"socket\":"
	    "\"/run/egressd/instances/weather.sock\"",
	    "" },
	{ "show instance notifier", "\"permissions\":[]", "" },
	{ "show instance nope", "\"code\":\"not-found\"", "" },
	{ "show grants weather",
	    "\"effective\":[\"api.weather.example\","
	    "\"*.tiles.weather.example\"]",
	    "" },
	{ "show grants weather",
	    "\"granted_not_effective\":"
	    "[\"cdn.weather.example\"]",
	    "" },
	{ "show grants weather", "\"allow_private_effective\":[]", "" },
	{ "show grants weather", "\"allow_loopback_effective\":[]", "" },
	{ "show grants gitea", "\"egress_allow_loopback\":[]", "" },
	{ "show grants gitea", "\"operator_defined\":true", "" },
	{ "show grants gitea",
	    "\"allow_private_effective\":"
	    "[\"git.lan.example\"]",
	    "" },
	{ "show grants gitea", "\"effective\":[\"git.lan.example\"]", "" },
	{ "show grants", "\"code\":\"usage\"", "" },
	{ "show metrics",
	    "egressd_decisions_total{instance=\"weather\","
	    "verdict=\"deny\",reason=\"private-address\"} 1\n",
	    "{"
	    "\"error" },
	{ "show metrics",
	    "egressd_decisions_total{instance=\"weather\","
	    "verdict=\"allow\",reason=\"granted\"} 2\n",
	    "reason=\"allow\"" },
	{ "show metrics", "egressd_build_info{version=\"0.1.0\"} 1\n", "" },
	{ "show metrics", "\negressd_config_valid 1\n", "" },
	{ "show metrics", "\negressd_config_generation 3\n", "" },
	{ "show metrics",
	    "\negressd_config_last_reload_success_timestamp_"
	    "seconds 86400\n",
	    "" },
	{ "show metrics", "\negressd_config_reload_failures_total 0\n", "" },
	{ "show metrics", "\n# TYPE process_open_fds gauge\nprocess_open_fds ",
	    "" },
	{ "show metrics", "egressd_leases_in_use{instance=\"weather\"} 2\n",
	    "" },
	{ "show metrics",
	    "egressd_upstream_errors_total{code=\"tls-failed\"} "
	    "1\n",
	    "" },
	{ "show metrics", "egressd_decision_seconds_bucket{le=\"0.0005\"} 2\n",
	    "" },
	{ "show metrics", "egressd_decision_seconds_bucket{le=\"+Inf\"} 3\n",
	    "" },
	{ "show metrics",
	    "egressd_bytes_total{instance=\"weather\","
	    "direction=\"in\"} 1000\n",
	    "" },
	{ "show metrics", "egressd_dns_lookup_seconds_count 1\n# HELP", "" },
	{ "show metrics", "\n\n", "# EOF" },
	{ "check weather http://api.weather.example/",
	    "\"verdict\":\"allow\","
	    "\"reason\":null,\"addresses\":[\"93.184.216.34\"]",
	    "" },
	{ "check weather http://10.0.0.7/",
	    "\"verdict\":\"deny\","
	    "\"reason\":\"private-address\"",
	    "" },
	{ "check weather http://fail.example/", "\"code\":\"failed\"", "" },
	{ "check nope http://x.example/", "\"code\":\"not-found\"", "" },
	{ "check weather", "\"code\":\"usage\"", "" },
	{ "reload",
	    "{\"reloaded\":true,\"generation\":3,\"instances\":3,"
	    "\"refused\":[]}",
	    "" },
	{ "reload now", "\"code\":\"usage\"", "" },
	{ "attach nope", "\"code\":\"not-found\"", "" },
	{ "help", "\"attach INSTANCE\"", "" },
	{ "", "\"code\":\"usage\"", "" },
	{ "frobnicate", "\"code\":\"unknown-command\"", "frobnicate" },
	{ "show \x01status", "invalid byte", "" },
	{ "show status \xc3\xa9", "invalid byte", "" },
	{ "a b c d e", "too many words", "" },
	{ "show instance "
	  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	    "\"code\":\"usage\"", "" },
};

ParameterizedTestParameters(broker_control, commands)
{
	return cr_make_param_array(struct cmd_case, cmd_cases,
	    sizeof(cmd_cases) / sizeof(cmd_cases[0]));
}

ParameterizedTest(struct cmd_case *c, broker_control, commands, .init = setup,
    .fini = teardown)
{
	json_error_t jerr;
	json_t *doc;

	cr_assert_eq(run(c->line), 0, "line '%s'", c->line);
	cr_assert_eq(nreplies, 1);
	cr_assert(ngot > 0 && got[ngot - 1] == '\n');
	cr_assert(strstr(got, c->want) != NULL, "'%s': want '%s' in %s",
	    c->line, c->want, got);
	if (c->unwanted[0] != '\0')
		cr_assert(strstr(got, c->unwanted) == NULL, "'%s': %s",
		    c->line, got);
	if (strcmp(c->line, "show metrics") != 0) {
		/* Exactly one JSON document on one line. */
		cr_assert(strchr(got, '\n') == got + ngot - 1);
		doc = json_loads(got, 0, &jerr);
		cr_assert(doc != NULL, "not JSON: %s", got);
		json_decref(doc);
	}
}

Test(broker_control, line_too_long, .init = setup, .fini = teardown)
{
	char line[CONTROL_LINE_MAX + 2];

	memset(line, 'a', sizeof(line) - 1);
	line[sizeof(line) - 1] = '\0';
	cr_assert_eq(run(line), 0);
	cr_assert(strstr(got, "line too long") != NULL);
}

Test(broker_control, reload_error_reported, .init = setup, .fini = teardown)
{
	F.reload_err = 1;
	cr_assert_eq(run("reload"), 0);
	cr_assert_eq(F.reloads, 1);
	cr_assert(strstr(got,
		      "\"code\":\"failed\",\"detail\":"
		      "\"egressd.ini:3: [broker] bogus: unknown key\"") !=
		NULL,
	    "%s", got);
}

Test(broker_control, check_completes_later, .init = setup, .fini = teardown)
{
	F.async = 1;
	cr_assert_eq(run("check weather http://api.weather.example/"), 1);
	cr_assert_eq(nreplies, 0);
	f_check_finish(&F);
	cr_assert_eq(nreplies, 1);
	cr_assert(strstr(got, "\"verdict\":\"allow\"") != NULL);
}

Test(broker_control, attach_passes_fd, .init = setup, .fini = teardown)
{
	char c = 0;

	cr_assert_eq(run("attach weather"), 0);
	cr_assert_str_eq(got, "{\"attached\":\"weather\"}\n");
	cr_assert(got_fd >= 0);
	/* It is the other end of the broker's socketpair. */
	cr_assert_eq(write(F.attach_peer, "x", 1), 1);
	cr_assert_eq(read(got_fd, &c, 1), 1);
	cr_assert_eq(c, 'x');
}

struct peer_case {
	char uids[32]; /* control_uids value; "-" for the default */
	char gids[32];
	unsigned uid, gid;
	int allowed;
};

static struct peer_case peer_cases[] = {
	{ "-", "", 0, 0, 1 }, { "-", "", 1000, 1000, 0 },
	{ "-", "", 1000, 0, 0 }, /* root's group is not root */
	{ "1000", "", 1000, 5, 1 },
	{ "1000", "", 0, 0, 0 }, /* the list replaces root */
	{ "0, 1000", "", 0, 0, 1 }, { "0", "50", 1000, 50, 1 },
	{ "0", "50", 1000, 51, 0 }, { "", "", 0, 0, 0 }, /* nobody */
};

ParameterizedTestParameters(broker_control, peers)
{
	return cr_make_param_array(struct peer_case, peer_cases,
	    sizeof(peer_cases) / sizeof(peer_cases[0]));
}

ParameterizedTest(struct peer_case *c, broker_control, peers)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors errs = { 0, NULL };
	char buf[512];

	(void)strcpy(buf, "[broker]\n");
	if (strcmp(c->uids, "-") != 0)
		(void)snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
		    "control_uids = %s\n", c->uids);
	if (c->gids[0] != '\0')
		(void)snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
		    "control_gids = %s\n", c->gids);
	cr_assert_eq(conf_load_buffer("/tmp/t.ini", buf, strlen(buf), &s,
			 &errs),
	    0, "%s: %s", buf, errs.n ? errs.msgs[0] : "?");
	cr_assert_eq(control_peer_allowed(s, c->uid, c->gid), c->allowed,
	    "%s uid %u gid %u", buf, c->uid, c->gid);
	conf_snapshot_free(s);
}

Test(broker_control, broken_config_allows_root_only)
{
	cr_assert_eq(control_peer_allowed(NULL, 0, 0), 1);
	cr_assert_eq(control_peer_allowed(NULL, 1, 0), 0);
}

/* Read one reply line (and an fd, if any) from fd, driving the loop. */
static void
read_line(struct event_base *base, int fd, char *buf, size_t n, int *ret_fd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	size_t have = 0;
	ssize_t k;

	while (have == 0 || buf[have - 1] != '\n') {
		struct iovec iov = { buf + have, n - have - 1 };
		struct msghdr mh;
		struct cmsghdr *h;

		(void)event_base_loop(base, EVLOOP_NONBLOCK);
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		k = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (k < 0)
			continue;
		cr_assert(k > 0, "EOF after %zu bytes", have);
		h = CMSG_FIRSTHDR(&mh);
		if (h != NULL && h->cmsg_type == SCM_RIGHTS && ret_fd != NULL)
			memcpy(ret_fd, CMSG_DATA(h), sizeof(int));
		have += (size_t)k;
		cr_assert(have < n - 1);
	}
	buf[have] = '\0';
}

Test(broker_control, server_over_socketpair, .init = setup, .fini = teardown)
{
	struct event_base *base = broker_base_new();
	struct control_server *cs = NULL;
	char buf[8192];
	int sv[2], fd = -1;

	cr_assert(base != NULL);
	cr_assert_eq(control_server_new(base, &fake_ops, &F, &cs), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	    0);
	/* We are root in CI; the peer check uses our own credentials. */
	cr_assert_eq(control_server_accept(cs, sv[1]),
	    getuid() == 0 ? 0 : EGRESS_ERR_DENIED);
	if (getuid() != 0) {
		read_line(base, sv[0], buf, sizeof(buf), NULL);
		cr_assert(strstr(buf, "permission denied") != NULL);
		goto out;
	}
	cr_assert_eq(control_server_count(cs), 1);
	/* Two commands in one write: two replies, in order. */
	cr_assert_eq(write(sv[0], "show status\nhelp\n", 17), 17);
	read_line(base, sv[0], buf, sizeof(buf), NULL);
	cr_assert(strstr(buf, "\"uptime_s\":42") != NULL, "%s", buf);
	if (strchr(buf, '\n') == buf + strlen(buf) - 1)
		read_line(base, sv[0], buf, sizeof(buf), NULL);
	cr_assert(strstr(buf, "\"commands\"") != NULL, "%s", buf);
	cr_assert_eq(write(sv[0], "attach weather\n", 15), 15);
	read_line(base, sv[0], buf, sizeof(buf), &fd);
	cr_assert_str_eq(buf, "{\"attached\":\"weather\"}\n");
	cr_assert(fd >= 0, "no fd with the attach reply");
	cr_assert_eq(write(F.attach_peer, "y", 1), 1);
	cr_assert_eq(read(fd, buf, 1), 1);
	cr_assert_eq(buf[0], 'y');
	(void)close(fd);
	/* The peer closes: the server lets the connection go. */
	(void)close(sv[0]);
	sv[0] = -1;
	while (control_server_count(cs) != 0)
		(void)event_base_loop(base, EVLOOP_ONCE);
out:
	if (sv[0] >= 0)
		(void)close(sv[0]);
	control_server_free(cs);
	event_base_free(base);
}

/* A socketpair whose SO_PEERCRED names uid and gid (as root: the pair
 * is made under those effective ids). */
static void
pair_as(uid_t uid, gid_t gid, int sv[2])
{
	cr_assert_eq(setegid(gid), 0);
	cr_assert_eq(seteuid(uid), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	    0);
	cr_assert_eq(seteuid(0), 0);
	cr_assert_eq(setegid(0), 0);
}

/* F.snap with control_uids = uids. */
static void
snap_with_uids(const char *uids)
{
	struct conf_errors errs = { 0, NULL };
	char buf[256];

	(void)snprintf(buf, sizeof(buf), "[broker]\ncontrol_uids = %s\n",
	    uids);
	conf_snapshot_free(F.snap);
	F.snap = NULL;
	cr_assert_eq(conf_load_buffer("/tmp/t.ini", buf, strlen(buf), &F.snap,
			 &errs),
	    0, "%s", errs.n ? errs.msgs[0] : "?");
}

/* Over CONTROL_CONNS_MAX other peers are refused; root still has
 * CONTROL_CONNS_RESERVE more, so peers holding every connection never
 * lock the operator (or a unit's reload) out. */
Test(broker_control, server_refuses_over_cap, .init = setup, .fini = teardown)
{
	enum { N = CONTROL_CONNS_MAX + CONTROL_CONNS_RESERVE + 2 };
	struct event_base *base = broker_base_new();
	struct control_server *cs = NULL;
	int sv[N][2];
	char buf[256];
	size_t i;
	ssize_t k;

	cr_assert_eq(control_server_new(base, &fake_ops, &F, &cs), 0);
	if (getuid() != 0)
		cr_skip_test("needs root (SO_PEERCRED is ours)");
	snap_with_uids("0, 65534");
	for (i = 0; i <= CONTROL_CONNS_MAX; i++) {
		pair_as(65534, 65534, sv[i]);
		cr_assert_eq(control_server_accept(cs, sv[i][1]),
		    i < CONTROL_CONNS_MAX ? 0 : EGRESS_ERR_AGAIN, "peer %zu",
		    i);
	}
	k = read(sv[CONTROL_CONNS_MAX][0], buf, sizeof(buf) - 1);
	cr_assert(k > 0);
	buf[k] = '\0';
	cr_assert(strstr(buf, "too many control connections") != NULL);
	for (i = CONTROL_CONNS_MAX + 1; i < N; i++) {
		pair_as(0, 0, sv[i]);
		cr_assert_eq(control_server_accept(cs, sv[i][1]),
		    i < N - 1 ? 0 : EGRESS_ERR_AGAIN, "root peer %zu", i);
	}
	cr_assert_eq(control_server_count(cs),
	    CONTROL_CONNS_MAX + CONTROL_CONNS_RESERVE);
	for (i = 0; i < N; i++)
		(void)close(sv[i][0]);
	control_server_free(cs);
	event_base_free(base);
}

/* A peer is checked for every command against the configuration then in
 * force: a connection served before its uid left control_uids gets one
 * error line for its next command, and is closed. */
Test(broker_control, a_peer_no_longer_allowed_is_refused_its_next_command,
    .init = setup, .fini = teardown)
{
	struct event_base *base = broker_base_new();
	struct control_server *cs = NULL;
	char buf[512];
	int sv[2];

	cr_assert_eq(control_server_new(base, &fake_ops, &F, &cs), 0);
	if (getuid() != 0)
		cr_skip_test("needs root (SO_PEERCRED is ours)");
	snap_with_uids("0, 65534");
	pair_as(65534, 65534, sv);
	cr_assert_eq(control_server_accept(cs, sv[1]), 0);
	cr_assert_eq(write(sv[0], "help\n", 5), 5);
	read_line(base, sv[0], buf, sizeof(buf), NULL);
	cr_assert(strstr(buf, "\"commands\"") != NULL, "%s", buf);
	snap_with_uids("0");
	cr_assert_eq(write(sv[0], "help\n", 5), 5);
	read_line(base, sv[0], buf, sizeof(buf), NULL);
	cr_assert_str_eq(buf,
	    "{\"error\":\"permission denied\",\"code\":\"denied\"}\n");
	while (control_server_count(cs) != 0)
		(void)event_base_loop(base, EVLOOP_ONCE);
	cr_assert_eq(read(sv[0], buf, sizeof(buf)), 0, "not closed");
	(void)close(sv[0]);
	control_server_free(cs);
	event_base_free(base);
}

/* A connection that sends no command for the idle time is closed; one
 * whose check is in flight is not, and its idle time runs from the
 * reply. */
Test(broker_control, an_idle_connection_is_closed, .init = setup,
    .timeout = 30, .fini = teardown)
{
	struct event_base *base = broker_base_new();
	struct control_server *cs = NULL;
	char buf[512];
	int sv[2][2];

	cr_assert_eq(control_server_new(base, &fake_ops, &F, &cs), 0);
	control_server_idle_ms(cs, 20);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[0]),
	    0);
	cr_assert_eq(control_server_accept(cs, sv[0][1]), 0);
	while (control_server_count(cs) != 0)
		(void)event_base_loop(base, EVLOOP_ONCE);
	cr_assert_eq(read(sv[0][0], buf, sizeof(buf)), 0, "not closed");
	F.async = 1;
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[1]),
	    0);
	cr_assert_eq(control_server_accept(cs, sv[1][1]), 0);
	cr_assert_eq(write(sv[1][0], "check weather https://a.example/\n", 33),
	    33);
	while (F.done == NULL)
		(void)event_base_loop(base, EVLOOP_ONCE);
	/* The idle time passes with the check in flight: still open. */
	(void)event_base_loop(base, EVLOOP_ONCE);
	cr_assert_eq(control_server_count(cs), 1);
	f_check_finish(&F);
	read_line(base, sv[1][0], buf, sizeof(buf), NULL);
	while (control_server_count(cs) != 0)
		(void)event_base_loop(base, EVLOOP_ONCE);
	(void)close(sv[0][0]);
	(void)close(sv[1][0]);
	control_server_free(cs);
	event_base_free(base);
}

Test(broker_metrics, label_cap_and_escaping)
{
	struct metrics *m = metrics_new();
	struct metrics_instance mi;
	char name[32], *text = NULL;
	size_t len = 0;
	int i;

	for (i = 0; i < METRICS_LABELS_MAX + 10; i++) {
		(void)snprintf(name, sizeof(name), "reason-%d", i);
		metrics_decision(m, "a\"b", 0, name, 1);
	}
	metrics_instance_get(m, "a\"b", &mi);
	cr_assert_eq(mi.denied, METRICS_LABELS_MAX + 10);
	cr_assert_eq(mi.nreasons, METRICS_LABELS_MAX + 1);
	cr_assert_str_eq(mi.reasons[METRICS_LABELS_MAX].reason, "other");
	cr_assert_eq(mi.reasons[METRICS_LABELS_MAX].count, 10);
	cr_assert_eq(metrics_format(m, NULL, &text, &len), 0);
	cr_assert(strstr(text,
		      "instance=\"a\\\"b\",verdict=\"deny\","
		      "reason=\"other\"} 10\n") != NULL,
	    "%s", text);
	cr_assert_eq(strlen(text), len);
	free(text);
	metrics_free(m);
}

/* Is fd closed? */
static int
fd_is_closed(int fd)
{
	return fcntl(fd, F_GETFD) < 0;
}

Test(broker_control, attach_listener_dispatch, .init = setup, .fini = teardown)
{
	const char *l = "attach-listener weather";
	int fds[2];

	/* Descriptors with another command: closed and refused. */
	fds[0] = dup(0);
	cr_assert_eq(control_dispatch_fds(&fake_ops, &F, "help", 4, fds, 1,
			 collect, NULL),
	    0);
	cr_assert(strstr(got, "descriptors sent with a command") != NULL, "%s",
	    got);
	cr_assert(fd_is_closed(fds[0]));
	/* attach-listener without descriptors: usage. */
	cr_assert_eq(run(l), 0);
	cr_assert(strstr(got, "\"code\":\"usage\"") != NULL, "%s", got);
	/* Unknown instance: not-found, descriptors closed. */
	ngot = 0;
	fds[0] = dup(0);
	cr_assert_eq(control_dispatch_fds(&fake_ops, &F,
			 "attach-listener nosuch", 22, fds, 1, collect, NULL),
	    0);
	cr_assert(strstr(got, "not-found") != NULL, "%s", got);
	cr_assert(fd_is_closed(fds[0]));
	/* Two listeners: handed over, the reply names them. */
	ngot = 0;
	fds[0] = dup(0);
	fds[1] = dup(0);
	cr_assert_eq(control_dispatch_fds(&fake_ops, &F, l, strlen(l), fds, 2,
			 collect, NULL),
	    0);
	cr_assert_str_eq(got,
	    "{\"attached_listener\":\"weather\",\"listeners\":2}\n");
	cr_assert_eq(F.listen_nfds, 2);
}

/* Send line with fds[0..n) by SCM_RIGHTS on fd. */
static void
send_with_fds(int fd, const char *line, const int *fds, size_t n)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(8 * sizeof(int))];
	} cm;
	struct iovec iov;
	struct msghdr mh;
	struct cmsghdr *h;

	memset(&mh, 0, sizeof(mh));
	memset(&cm, 0, sizeof(cm));
	iov.iov_base = (void *)line;
	iov.iov_len = strlen(line);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.b;
	mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
	if ((h = CMSG_FIRSTHDR(&mh)) == NULL) {
		cr_assert_fail("no room for a control message (n = %zu)",
		    (size_t)n);
		return;
	}
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(h), fds, n * sizeof(int));
	cr_assert_eq(sendmsg(fd, &mh, 0), (ssize_t)strlen(line));
}

Test(broker_control, server_descriptors_belong_to_their_line, .init = setup,
    .fini = teardown)
{
	struct event_base *base = broker_base_new();
	struct control_server *cs = NULL;
	char buf[4096];
	int sv[2], p[2], fds[5];
	size_t i;

	cr_assert_eq(control_server_new(base, &fake_ops, &F, &cs), 0);
	if (getuid() != 0)
		cr_skip_test("needs root (SO_PEERCRED is ours)");
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	    0);
	cr_assert_eq(control_server_accept(cs, sv[1]), 0);
	/* A descriptor with `help`: refused, and the broker closes it. */
	cr_assert_eq(pipe(p), 0);
	send_with_fds(sv[0], "help\n", &p[1], 1);
	(void)close(p[1]);
	read_line(base, sv[0], buf, sizeof(buf), NULL);
	cr_assert(strstr(buf, "descriptors sent with a command") != NULL, "%s",
	    buf);
	cr_assert_eq(read(p[0], buf, 1), 0, "the broker kept the pipe");
	(void)close(p[0]);
	/* The connection goes on; a line without one is served. */
	cr_assert_eq(write(sv[0], "help\n", 5), 5);
	read_line(base, sv[0], buf, sizeof(buf), NULL);
	cr_assert(strstr(buf, "\"commands\"") != NULL, "%s", buf);
	cr_assert_eq(F.listen_nfds, 0);
	/* More than CONTROL_FDS_MAX at once: the connection is dropped. */
	for (i = 0; i < 5; i++)
		fds[i] = dup(0);
	send_with_fds(sv[0], "attach-listener weather\n", fds, 5);
	for (i = 0; i < 5; i++)
		(void)close(fds[i]);
	while (control_server_count(cs) != 0)
		(void)event_base_loop(base, EVLOOP_ONCE);
	cr_assert_eq(F.listen_nfds, 0);
	(void)close(sv[0]);
	control_server_free(cs);
	event_base_free(base);
}

Test(broker_control, attach_listener_hold, .init = setup, .fini = teardown)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct event_base *base = broker_base_new();
	struct control_server *cs = NULL;
	struct iovec iov;
	struct msghdr mh;
	struct cmsghdr *h;
	char buf[512], line[] = "attach-listener weather\n";
	int sv[2], lfd;

	cr_assert_eq(control_server_new(base, &fake_ops, &F, &cs), 0);
	if (getuid() != 0)
		cr_skip_test("needs root (SO_PEERCRED is ours)");
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	    0);
	cr_assert_eq(control_server_accept(cs, sv[1]), 0);
	lfd = dup(0);
	memset(&mh, 0, sizeof(mh));
	memset(&cm, 0, sizeof(cm));
	iov.iov_base = line;
	iov.iov_len = strlen(line);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.b;
	mh.msg_controllen = sizeof(cm.b);
	h = CMSG_FIRSTHDR(&mh);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &lfd, sizeof(int));
	cr_assert_eq(sendmsg(sv[0], &mh, 0), (ssize_t)strlen(line));
	(void)close(lfd);
	read_line(base, sv[0], buf, sizeof(buf), NULL);
	cr_assert(strstr(buf, "\"attached_listener\"") != NULL, "%s", buf);
	cr_assert_eq(F.listen_nfds, 1);
	/* A hold no longer counts against CONTROL_CONNS_MAX. */
	cr_assert_eq(control_server_count(cs), 0);
	cr_assert_eq(F.detached, 0);
	/* Its launcher goes: the hold ends. */
	(void)close(sv[0]);
	while (F.detached == 0)
		(void)event_base_loop(base, EVLOOP_ONCE);
	cr_assert_eq(F.detached, 7);
	control_server_free(cs);
	event_base_free(base);
}

/* With the lines of a loop turn held (as the broker's loop holds them),
 * a reply still comes after the events its command logged: a script
 * that reloads and then reads the log finds the reload's lines. */
Test(broker_control, a_reply_follows_the_events_it_caused, .init = setup,
    .fini = teardown)
{
	struct event_base *base = broker_base_new();
	struct control_server *cs = NULL;
	char buf[8192], lines[4096];
	int sv[2], lp[2];
	ssize_t n;

	if (getuid() != 0)
		cr_skip_test("the peer check needs root");
	cr_assert(base != NULL);
	cr_assert_eq(pipe2(lp, O_CLOEXEC | O_NONBLOCK), 0);
	log_set_fd(lp[1]);
	log_hold(1);
	F.log_reload = 1;
	cr_assert_eq(control_server_new(base, &fake_ops, &F, &cs), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
	    0);
	cr_assert_eq(control_server_accept(cs, sv[1]), 0);
	cr_assert_eq(write(sv[0], "reload\n", 7), 7);
	read_line(base, sv[0], buf, sizeof(buf), NULL);
	cr_assert(strstr(buf, "reload") != NULL, "%s", buf);
	n = read(lp[0], lines, sizeof(lines) - 1);
	cr_assert_gt(n, 0, "the reply came before the reload's event");
	lines[n] = '\0';
	cr_assert(strstr(lines, "\"what\":\"reloaded\"") != NULL, "%s", lines);
	log_hold(0);
	log_set_fd(-1);
	(void)close(lp[0]);
	(void)close(lp[1]);
	(void)close(sv[0]);
	control_server_free(cs);
	event_base_free(base);
}
