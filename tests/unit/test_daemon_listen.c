/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/listen: instance sockets follow each snapshot's
 * socket_owner / socket_group. Removing the line gives the socket back to
 * the broker's own uid and gid (the old owner or group loses access), a
 * change of owner or group revokes the connections accepted before it
 * (the revoke callback names the instance), and an unchanged entry
 * revokes nothing. A socket swapped for a symlink is never chmodded
 * through it, and an instance_socket_dir others can write to, or that the
 * broker does not own, is refused. Sockets live in a fresh folder under
 * /tmp; the chown
 * to a foreign id needs root (CAP_CHOWN), so those cases skip otherwise.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <event2/event.h>

#include "broker/listen.h"
#include "conf/conf.h"

struct revokes {
	int n;
	char last[64];
};

static void
acc_cb(void *arg, int fd, const char *instance)
{
	(void)close(fd);
}

static void
revoke_cb(void *arg, const char *instance)
{
	struct revokes *rv = arg;

	rv->n++;
	(void)snprintf(rv->last, sizeof(rv->last), "%s", instance);
}

struct owner_case {
	char first_owner[16];	/* "" for unset */
	char first_group[16];
	char second_owner[16];
	char second_group[16];
	unsigned want_uid;	/* after the second reconcile; -1: euid */
	unsigned want_gid;	/* -1: egid */
	int want_revokes;
};

ParameterizedTestParameters(broker_listen, owner_follows_entry)
{
	static struct owner_case cases[] = {
		{ "", "4242", "", "", -1u, -1u, 1 },
		{ "4343", "", "", "", -1u, -1u, 1 },
		{ "4343", "4242", "", "4242", -1u, 4242, 1 },
		{ "", "4242", "", "4244", -1u, 4244, 1 },
		{ "", "4242", "", "4242", -1u, 4242, 0 },
		{ "", "", "", "", -1u, -1u, 0 },
		{ "", "", "", "4242", -1u, 4242, 1 },
	};

	return cr_make_param_array(struct owner_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

static char *
opt(char *s)
{
	return s[0] != '\0' ? s : NULL;
}

ParameterizedTest(struct owner_case *c, broker_listen, owner_follows_entry)
{
	char dir[] = "/tmp/test_broker_listenXXXXXX", path[256];
	struct event_base *base = event_base_new();
	struct revokes rv;
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st;
	unsigned uid, gid;

	if (geteuid() != 0)
		cr_skip_test("chown to a foreign id needs root");
	memset(&rv, 0, sizeof(rv));
	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(base != NULL);
	cr_assert(mkdtemp(dir) != NULL);
	cr_assert(listen_new(base, acc_cb, NULL, &rv, &l) == 0);
	listen_set_revoke_cb(l, revoke_cb);
	s.instance_socket_dir = dir;
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	ci.socket_owner = opt(c->first_owner);
	ci.socket_group = opt(c->first_group);
	cr_assert_eq(listen_reconcile(l, &s), 0);
	cr_assert_eq(rv.n, 0, "a new socket revokes nothing");
	(void)snprintf(path, sizeof(path), "%s/a.sock", dir);

	ci.socket_owner = opt(c->second_owner);
	ci.socket_group = opt(c->second_group);
	cr_assert_eq(listen_reconcile(l, &s), 0);
	cr_assert(stat(path, &st) == 0);
	uid = c->want_uid == -1u ? (unsigned)geteuid() : c->want_uid;
	gid = c->want_gid == -1u ? (unsigned)getegid() : c->want_gid;
	cr_assert_eq((unsigned)st.st_uid, uid, "uid %u, want %u",
	    (unsigned)st.st_uid, uid);
	cr_assert_eq((unsigned)st.st_gid, gid, "gid %u, want %u",
	    (unsigned)st.st_gid, gid);
	cr_assert_eq(st.st_mode & 0777, 0660);
	cr_assert_eq(rv.n, c->want_revokes);
	if (c->want_revokes > 0)
		cr_assert_str_eq(rv.last, "a");
	listen_free(l);
	(void)rmdir(dir);
	event_base_free(base);
}

/* An owner that cannot be resolved closes the socket (0600) and revokes. */
Test(broker_listen, unknown_owner_closes)
{
	char dir[] = "/tmp/test_broker_listenXXXXXX", path[256];
	struct event_base *base = event_base_new();
	struct revokes rv;
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st;

	memset(&rv, 0, sizeof(rv));
	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(mkdtemp(dir) != NULL);
	cr_assert(listen_new(base, acc_cb, NULL, &rv, &l) == 0);
	listen_set_revoke_cb(l, revoke_cb);
	s.instance_socket_dir = dir;
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	cr_assert_eq(listen_reconcile(l, &s), 0);
	ci.socket_owner = "no-such-user-egressd-test";
	cr_assert_eq(listen_reconcile(l, &s), 1);
	(void)snprintf(path, sizeof(path), "%s/a.sock", dir);
	cr_assert(stat(path, &st) == 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	cr_assert_eq(rv.n, 1);
	listen_free(l);
	(void)rmdir(dir);
	event_base_free(base);
}

struct dir_case {
	char name[24];
	unsigned mode;
	int foreign_owner;	/* chown the folder to uid 4242 */
	int want_bad;
};

ParameterizedTestParameters(broker_listen, socket_dir_must_be_ours)
{
	static struct dir_case cases[] = {
		{ "0700", 0700, 0, 0 },
		{ "0755", 0755, 0, 0 },
		{ "world-writable", 0777, 0, 1 },
		{ "sticky-1777", 01777, 0, 1 },
		{ "group-writable", 0770, 0, 1 },
		{ "foreign-owner", 0755, 1, 1 },
	};

	return cr_make_param_array(struct dir_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct dir_case *c, broker_listen, socket_dir_must_be_ours)
{
	char dir[] = "/tmp/test_broker_listenXXXXXX", path[256];
	struct event_base *base = event_base_new();
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st;

	if (c->foreign_owner && geteuid() != 0)
		cr_skip_test("chown to a foreign id needs root");
	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(mkdtemp(dir) != NULL);
	cr_assert(chmod(dir, c->mode) == 0);
	if (c->foreign_owner)
		cr_assert(chown(dir, 4242, (gid_t)-1) == 0);
	cr_assert(listen_new(base, acc_cb, NULL, NULL, &l) == 0);
	s.instance_socket_dir = dir;
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	cr_assert_eq(listen_reconcile(l, &s), c->want_bad, "%s", c->name);
	(void)snprintf(path, sizeof(path), "%s/a.sock", dir);
	if (c->want_bad) {
		cr_assert(lstat(path, &st) != 0, "%s: socket created",
		    c->name);
		cr_assert_eq(listen_count(l), 0);
	} else {
		cr_assert(lstat(path, &st) == 0);
		cr_assert(S_ISSOCK(st.st_mode));
		cr_assert_eq(st.st_mode & 0777, 0660);
	}
	listen_free(l);
	(void)rmdir(dir);
	event_base_free(base);
}

/*
 * The socket replaced by a symlink to another file between two reloads:
 * the mode is never applied through the link.
 */
Test(broker_listen, chmod_never_follows_a_link)
{
	char dir[] = "/tmp/test_broker_listenXXXXXX", path[256],
	    victim[256];
	struct event_base *base = event_base_new();
	struct conf_snapshot s;
	struct conf_instance ci;
	struct listen_ctx *l = NULL;
	struct stat st;
	int fd;

	memset(&s, 0, sizeof(s));
	memset(&ci, 0, sizeof(ci));
	cr_assert(mkdtemp(dir) != NULL);
	cr_assert(listen_new(base, acc_cb, NULL, NULL, &l) == 0);
	s.instance_socket_dir = dir;
	s.instances = &ci;
	s.ninstances = 1;
	ci.name = "a";
	cr_assert_eq(listen_reconcile(l, &s), 0);
	(void)snprintf(path, sizeof(path), "%s/a.sock", dir);
	(void)snprintf(victim, sizeof(victim), "%s/victim", dir);
	fd = open(victim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	cr_assert(fd >= 0);
	(void)close(fd);
	cr_assert(unlink(path) == 0);
	cr_assert(symlink(victim, path) == 0);
	(void)listen_reconcile(l, &s);
	cr_assert(stat(victim, &st) == 0);
	cr_assert_eq(st.st_mode & 0777, 0600, "chmod followed the link: %o",
	    (unsigned)(st.st_mode & 0777));
	listen_free(l);
	(void)unlink(path);
	(void)unlink(victim);
	(void)rmdir(dir);
	event_base_free(base);
}
