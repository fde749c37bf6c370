/* SPDX-License-Identifier: ISC */
/*
 * lease: a chained hash of per-instance counters (FNV-1a over the name,
 * power-of-two buckets, grown at load 1). A counter exists only while its
 * instance holds a lease, so removed instances cost nothing; a lease
 * points at its counter, so release is O(1) and never looks the name up.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <egress/error.h>

#include "broker/net/lease.h"
#include "broker/net/share.h"

struct lease_entry {
	struct lease_entry *next;
	struct lease_table *t;
	uint32_t hash;
	unsigned count;
	char name[LEASE_NAME_MAX + 1];
};

struct lease {
	struct lease_entry *e;
};

struct lease_table {
	struct lease_entry **b;
	size_t nb; /* power of two */
	size_t nentries;
	size_t total;
	struct share *share; /* NULL: per-instance budgets only */
};

static uint32_t
lease_hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 16777619u;
	}
	return h;
}

struct lease_table *
lease_table_new(void)
{
	struct lease_table *t;

	if ((t = calloc(1, sizeof(*t))) == NULL)
		return NULL;
	t->nb = 16;
	// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
	if ((t->b = calloc(t->nb, sizeof(*t->b))) == NULL) {
		free(t);
		return NULL;
	}
	return t;
}

void
lease_table_free(struct lease_table *t)
{
	if (t == NULL)
		return;
	assert(t->nentries == 0);
	free(t->b);
	free(t);
}

void
lease_table_set_share(struct lease_table *t, struct share *s)
{
	if (t != NULL)
		t->share = s;
}

static struct lease_entry **
lease_find(const struct lease_table *t, const char *name, size_t n, uint32_t h)
{
	struct lease_entry **ep;

	for (ep = &t->b[h & (t->nb - 1)]; *ep != NULL; ep = &(*ep)->next)
		if ((*ep)->hash == h && strncmp((*ep)->name, name, n) == 0 &&
		    (*ep)->name[n] == '\0')
			return ep;
	return ep;
}

static void
lease_grow(struct lease_table *t)
{
	struct lease_entry **nb, *e, *next;
	size_t i, n = t->nb * 2;

	// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
	if ((nb = calloc(n, sizeof(*nb))) == NULL)
		return; /* longer chains, still correct */
	for (i = 0; i < t->nb; i++)
		for (e = t->b[i]; e != NULL; e = next) {
			next = e->next;
			e->next = nb[e->hash & (n - 1)];
			nb[e->hash & (n - 1)] = e;
		}
	free(t->b);
	t->b = nb;
	t->nb = n;
}

int
lease_acquire(struct lease_table *t, const char *instance, unsigned max,
    struct lease **ret)
{
	struct lease_entry **ep, *e;
	struct lease *l;
	uint32_t h;
	size_t n;
	int err;

	if (t == NULL || instance == NULL || ret == NULL)
		return EGRESS_ERR_INVALID;
	n = strnlen(instance, LEASE_NAME_MAX + 1);
	if (n == 0 || n > LEASE_NAME_MAX)
		return EGRESS_ERR_INVALID;
	h = lease_hash(instance, n);
	ep = lease_find(t, instance, n, h);
	if ((e = *ep) != NULL && e->count >= max)
		return EGRESS_ERR_BUDGET_EXHAUSTED;
	if (e == NULL && max == 0)
		return EGRESS_ERR_BUDGET_EXHAUSTED;
	if ((l = malloc(sizeof(*l))) == NULL)
		return EGRESS_ERR_NOMEM;
	if (e == NULL && (e = calloc(1, sizeof(*e))) == NULL) {
		free(l);
		return EGRESS_ERR_NOMEM;
	}
	if (t->share != NULL &&
	    (err = share_acquire(t->share, instance, NULL, 1)) != 0) {
		if (e->count == 0)
			free(e); /* not linked yet */
		free(l);
		return err;
	}
	if (e->count == 0) {
		e->t = t;
		e->hash = h;
		memcpy(e->name, instance, n);
		e->next = *ep;
		*ep = e;
		if (++t->nentries > t->nb)
			lease_grow(t);
	}
	e->count++;
	t->total++;
	l->e = e;
	*ret = l;
	return 0;
}

void
lease_release(struct lease *l)
{
	struct lease_entry *e, **ep;
	struct lease_table *t;

	if (l == NULL)
		return;
	e = l->e;
	t = e->t;
	free(l);
	assert(e->count > 0);
	t->total--;
	if (t->share != NULL)
		share_release(t->share, e->name, 1);
	if (--e->count > 0)
		return;
	ep = lease_find(t, e->name, strlen(e->name), e->hash);
	assert(*ep == e);
	*ep = e->next;
	t->nentries--;
	free(e);
}

unsigned
lease_count(const struct lease_table *t, const char *instance)
{
	struct lease_entry *e;
	size_t n;

	if (t == NULL || instance == NULL)
		return 0;
	n = strnlen(instance, LEASE_NAME_MAX + 1);
	if (n == 0 || n > LEASE_NAME_MAX)
		return 0;
	e = *lease_find(t, instance, n, lease_hash(instance, n));
	return e != NULL ? e->count : 0;
}

const char *
lease_instance(const struct lease *l)
{
	return l->e->name;
}

int
lease_is_borrowing(const struct lease_table *t, const char *instance)
{
	return t != NULL && t->share != NULL && instance != NULL &&
	    share_borrowed(t->share, instance) > 0;
}

int
lease_is_within_guarantee(const struct lease_table *t, const char *instance)
{
	return t != NULL && t->share != NULL && instance != NULL &&
	    share_unmet(t->share, instance) > 0;
}

size_t
lease_total(const struct lease_table *t)
{
	return t != NULL ? t->total : 0;
}
