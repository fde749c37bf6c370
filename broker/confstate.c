/* SPDX-License-Identifier: ISC */
/*
 * The current configuration snapshot, its change detection and its
 * reloads. See confstate.h for the rules (never serve an old policy after
 * a broken edit; log the errors once per failed parse).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include <egress/error.h>

#include "broker/confstate.h"
#include "broker/log.h"

static struct confref *
confref_new(struct conf_snapshot *s)
{
	struct confref *r;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return NULL;
	r->snap = s;
	r->refs = 1;
	return r;
}

struct confref *
confref_ref(struct confref *r)
{
	if (r != NULL)
		r->refs++;
	return r;
}

void
confref_unref(struct confref *r)
{
	if (r == NULL || --r->refs > 0)
		return;
	conf_snapshot_free(r->snap);
	free(r);
}

static int64_t
ts_ns(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* Record the configuration file's identity at a failed parse. */
static void
confstate_note_broken(struct confstate *cs)
{
	struct stat st;

	if (stat(cs->path, &st) != 0) {
		cs->broken_exists = 0;
		return;
	}
	cs->broken_exists = 1;
	cs->broken_dev = st.st_dev;
	cs->broken_ino = st.st_ino;
	cs->broken_size = st.st_size;
	cs->broken_mtime_ns = ts_ns(&st.st_mtim);
	cs->broken_ctime_ns = ts_ns(&st.st_ctim);
}

static int
confstate_broken_changed(const struct confstate *cs)
{
	struct stat st;

	if (stat(cs->path, &st) != 0)
		return cs->broken_exists;
	return !cs->broken_exists || st.st_dev != cs->broken_dev ||
	    st.st_ino != cs->broken_ino || st.st_size != cs->broken_size ||
	    ts_ns(&st.st_mtim) != cs->broken_mtime_ns ||
	    ts_ns(&st.st_ctim) != cs->broken_ctime_ns;
}

static void
confstate_log_errors(const struct confstate *cs, int err,
    const struct conf_errors *e)
{
	json_t *o, *a;
	size_t i;

	if ((o = json_object()) == NULL)
		return;
	if ((a = json_array()) == NULL) {
		json_decref(o);
		return;
	}
	for (i = 0; i < e->n; i++)
		(void)json_array_append_new(a,
		    log_bounded_string(e->msgs[i], strlen(e->msgs[i])));
	if (e->n == 0)
		(void)json_array_append_new(a,
		    json_string(egress_strerror(err)));
	(void)json_object_set_new(o, "status", json_string("invalid"));
	(void)json_object_set_new(o, "file",
	    log_bounded_string(cs->path, strlen(cs->path)));
	(void)json_object_set_new(o, "errors", a);
	log_event("egress.config", o);
}

json_t *
confstate_refused_json(const struct conf_snapshot *s)
{
	char file[LOG_STR_MAX + sizeof(LOG_TRUNC_MARK)];
	const struct conf_instance *ci;
	json_t *a, *o;
	size_t i;

	if ((a = json_array()) == NULL)
		return NULL;
	if (log_bound(s->path, strlen(s->path), file, sizeof(file)) < 0)
		file[0] = '\0';
	for (i = 0; i < s->ninstances; i++) {
		ci = &s->instances[i];
		if (ci->manifest != NULL)
			continue;
		o = json_pack("{s:o, s:o, s:o, s:o}", "instance",
		    json_string(ci->name), "plugin",
		    ci->plugin != NULL ? json_string(ci->plugin) : json_null(),
		    "entry", json_sprintf("%s:%d", file, ci->line), "error",
		    ci->manifest_error != NULL ?
			log_bounded_string(ci->manifest_error,
			    strlen(ci->manifest_error)) :
			json_string("refused"));
		if (o == NULL || json_array_append_new(a, o) != 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* Answer whether entry opens nothing in egress_allow_private: its hosts
 * are in the loopback class whatever DNS says. */
static int
carve_is_loopback(const struct policy_entry *en)
{
	struct policy_addr a;

	if (policy_host_is_loopback_name(&en->host))
		return 1;
	if (en->host.kind == POLICY_HOST_NAME ||
	    policy_addr_parse(en->host.name, &a) != 0)
		return 0;
	return (policy_addr_classify(NULL, &a) & POLICY_CLASS_LOOPBACK) != 0;
}

size_t
confstate_carve_warnings(const struct conf_snapshot *s,
    void (*fn)(void *arg, const char *msg), void *arg)
{
	const struct conf_instance *ci;
	const struct policy_entry *en;
	char t[POLICY_NAME_MAX + 8], *msg;
	size_t i, j, n = 0;

	for (i = 0; i < s->ninstances; i++) {
		ci = &s->instances[i];
		for (j = 0; j < policy_grant_count(ci->allow_private); j++) {
			en = policy_grant_entry(ci->allow_private, j);
			if (en == NULL || !carve_is_loopback(en) ||
			    policy_entry_format(en, t, sizeof(t)) < 0)
				continue;
			if (asprintf(&msg,
				"%s:%d: warning: [plugins.entries.%s] "
				"egress_allow_private: %s is loopback, which "
				"egress_allow_private does not open: list it "
				"in egress_allow_loopback",
				s->path, ci->line, ci->name, t) < 0)
				continue;
			fn(arg, msg);
			free(msg);
			n++;
		}
	}
	return n;
}

static void
warn_json(void *arg, const char *msg)
{
	(void)json_array_append_new(arg, log_bounded_string(msg, strlen(msg)));
}

json_t *
confstate_warnings_json(const struct conf_snapshot *s)
{
	json_t *a = json_array();

	if (a == NULL || confstate_carve_warnings(s, warn_json, a) == 0) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static void
confstate_log_loaded(const struct confstate *cs)
{
	const struct conf_snapshot *s = cs->cur->snap;
	json_t *o;

	o = json_pack("{s:s, s:I, s:I, s:o*, s:o*}", "status", "loaded",
	    "generation", (json_int_t)s->generation, "instances",
	    (json_int_t)s->ninstances, "refused", confstate_refused_json(s),
	    "warnings", confstate_warnings_json(s));
	if (o != NULL)
		log_event("egress.config", o);
}

int
confstate_init(struct confstate *cs, const char *path, confstate_reload_cb cb,
    void *arg, struct conf_errors *reterr)
{
	struct conf_snapshot *s = NULL;
	int err;

	memset(cs, 0, sizeof(*cs));
	confwatch_init(&cs->watch);
	if ((cs->path = strdup(path)) == NULL)
		return EGRESS_ERR_NOMEM;
	err = conf_load(path, &s, reterr);
	if (err != 0)
		goto fail;
	s->generation = 1;
	if ((cs->cur = confref_new(s)) == NULL) {
		conf_snapshot_free(s);
		err = EGRESS_ERR_NOMEM;
		goto fail;
	}
	cs->generation = 1;
	cs->loaded_unix = (int64_t)time(NULL);
	confwatch_arm(&cs->watch, s);
	cs->cb = cb;
	cs->cb_arg = arg;
	return 0;
fail:
	free(cs->path);
	cs->path = NULL;
	return err;
}

static void
confstate_clear_errors(struct confstate *cs)
{
	size_t i;

	for (i = 0; i < cs->nerrors; i++)
		free(cs->errors[i]);
	free(cs->errors);
	cs->errors = NULL;
	cs->nerrors = 0;
}

void
confstate_done(struct confstate *cs)
{
	confwatch_off(&cs->watch, NULL);
	confref_unref(cs->cur);
	cs->cur = NULL;
	free(cs->path);
	cs->path = NULL;
	free(cs->error);
	cs->error = NULL;
	confstate_clear_errors(cs);
}

const char *
confstate_error(const struct confstate *cs)
{
	return cs->cur == NULL ?
	    (cs->error != NULL ? cs->error : "configuration unavailable") :
	    NULL;
}

/* Keep the first error message of a failed parse, bounded. */
static void
confstate_note_error(struct confstate *cs, int err,
    const struct conf_errors *e)
{
	char buf[LOG_STR_MAX + sizeof(LOG_TRUNC_MARK)];
	const char *m = e->n > 0 ? e->msgs[0] : egress_strerror(err);

	size_t i, n = e->n > 0 ? e->n : 1;

	free(cs->error);
	cs->error = NULL;
	if (log_bound(m, strlen(m), buf, sizeof(buf)) >= 0)
		cs->error = strdup(buf);
	confstate_clear_errors(cs);
	if (n > CONFSTATE_ERRORS_MAX)
		n = CONFSTATE_ERRORS_MAX;
	if ((cs->errors = calloc(n, sizeof(*cs->errors))) == NULL)
		return;
	for (i = 0; i < n; i++) {
		m = e->n > 0 ? e->msgs[i] : egress_strerror(err);
#ifndef __clang__ /* gcc 12 -fanalyzer loses the block stored in cs->errors */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
#endif
		if (log_bound(m, strlen(m), buf, sizeof(buf)) < 0 ||
		    (cs->errors[cs->nerrors] = strdup(buf)) == NULL)
#ifndef __clang__
#pragma GCC diagnostic pop
#endif
			break;
		cs->nerrors++;
	}
}

void
confstate_reload(struct confstate *cs)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors errs = { 0, NULL };
	struct confref *r;
	int err;

	err = conf_load(cs->path, &s, &errs);
	if (err == 0) {
		s->generation = cs->generation + 1;
		if ((r = confref_new(s)) == NULL) {
			conf_snapshot_free(s);
			err = EGRESS_ERR_NOMEM;
		}
	}
	if (err != 0) {
		/* Never keep serving the old policy. A file that could not be
		 * read (no descriptor, no memory) is tried again at the next
		 * use; the event is logged once per break, not per try. */
		int unread = err == EGRESS_ERR_IO || err == EGRESS_ERR_NOMEM;
		int again = cs->cur == NULL && cs->broken_unread && unread;

		confref_unref(cs->cur);
		cs->cur = NULL;
		confwatch_off(&cs->watch, "stat: the configuration is broken");
		cs->broken_unread = unread;
		if (again) {
			conf_errors_done(&errs);
			return;
		}
		cs->failures++;
		if (cs->broken_since_unix == 0)
			cs->broken_since_unix = (int64_t)time(NULL);
		confstate_note_broken(cs);
		confstate_note_error(cs, err, &errs);
		confstate_log_errors(cs, err, &errs);
		conf_errors_done(&errs);
		if (cs->cb != NULL)
			cs->cb(cs->cb_arg, NULL);
		return;
	}
	cs->broken_unread = 0;
	conf_errors_done(&errs);
	confref_unref(cs->cur);
	cs->cur = r;
	if (!cs->unwatched)
		confwatch_arm(&cs->watch, s);
	cs->generation = s->generation;
	cs->loaded_unix = (int64_t)time(NULL);
	free(cs->error);
	cs->error = NULL;
	confstate_clear_errors(cs);
	cs->broken_since_unix = 0;
	cs->reloads++;
	confstate_log_loaded(cs);
	if (cs->cb != NULL)
		cs->cb(cs->cb_arg, s);
}

struct confref *
confstate_get(struct confstate *cs)
{
	return confstate_get_for(cs, NULL);
}

/*
 * Answer whether the current snapshot is stale: nothing changed when the
 * watch vouches for it; else the stat() calls, over every file while the
 * watch is in use (which it then trusts again), over the files a decision
 * for instance reads otherwise.
 */
static int
confstate_cur_stale(struct confstate *cs, const char *instance, int poll)
{
	struct conf_snapshot *s = cs->cur->snap;
	int stale;

	if (!poll && confwatch_quiet(&cs->watch))
		return 0;
	if (cs->watch.state == CONFWATCH_OFF)
		return conf_snapshot_is_stale_for(s, instance);
	if ((stale = conf_snapshot_is_stale(s)) == 0)
		confwatch_settle(&cs->watch, s);
	return stale;
}

static struct confref *
confstate_look(struct confstate *cs, const char *instance, int poll)
{
	int stale = cs->cur != NULL ?
	    confstate_cur_stale(cs, instance, poll) :
	    cs->broken_unread || confstate_broken_changed(cs);

	if (stale) {
		cs->in_use++; /* a look nested in the callback keeps it set */
		confstate_reload(cs);
		cs->in_use--;
	}
	return confref_ref(cs->cur);
}

struct confref *
confstate_get_for(struct confstate *cs, const char *instance)
{
	return confstate_look(cs, instance, 0);
}

void
confstate_poll(struct confstate *cs)
{
	confref_unref(confstate_look(cs, NULL, 1));
}

void
confstate_unwatch(struct confstate *cs)
{
	cs->unwatched = 1;
	confwatch_off(&cs->watch, "stat: draining");
}

int
confstate_is_valid(const struct confstate *cs)
{
	return cs->cur != NULL;
}
