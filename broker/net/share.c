/* SPDX-License-Identifier: ISC */
/*
 * Fair shares of one bounded pool (see share.h): per-instance holdings
 * with a reserved guarantee, and borrowing shared fairly across plugins.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <egress/error.h>

#include "broker/net/share.h"

#define SHARE_BUCKETS  256
#define SHARE_NAME_MAX 64

/* A plugin: what its instances borrow beyond their guarantees. */
struct share_group {
	struct share_group *next;
	size_t borrowed;
	size_t nmembers; /* instances that point at it */
	char name[SHARE_NAME_MAX + 1];
};

/* An instance: what it holds, and whether it is configured. */
struct share_node {
	struct share_node *next;
	struct share_group *group;
	size_t held;
	int configured;
	char name[SHARE_NAME_MAX + 1];
};

struct share {
	size_t capacity, guarantee_max, per_max;
	size_t guarantee; /* now, per configured instance */
	size_t total;	  /* held by everyone */
	size_t unmet;	  /* configured guarantees not held yet */
	size_t nconfigured;
	size_t nborrowing; /* groups with borrowed > 0 */
	struct share_node *nodes[SHARE_BUCKETS];
	struct share_group *groups[SHARE_BUCKETS];
};

static size_t
share_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s != '\0')
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h % SHARE_BUCKETS;
}

static size_t
min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* What of h is within the guarantee g, and what is borrowed. */
static size_t
within(size_t h, size_t g)
{
	return min_sz(h, g);
}

static size_t
beyond(size_t h, size_t g)
{
	return h > g ? h - g : 0;
}

static size_t
node_guarantee(const struct share *s, const struct share_node *n)
{
	return n->configured ? s->guarantee : 0;
}

static struct share_node *
node_find(const struct share *s, const char *name)
{
	struct share_node *n;

	for (n = s->nodes[share_hash(name)]; n != NULL; n = n->next)
		if (strcmp(n->name, name) == 0)
			return n;
	return NULL;
}

static struct share_group *
group_get(struct share *s, const char *name)
{
	struct share_group *g, **pp = &s->groups[share_hash(name)];

	for (g = *pp; g != NULL; g = g->next)
		if (strcmp(g->name, name) == 0)
			return g;
	if (strlen(name) > SHARE_NAME_MAX ||
	    (g = calloc(1, sizeof(*g))) == NULL)
		return NULL;
	memcpy(g->name, name, strlen(name) + 1);
	g->next = *pp;
	*pp = g;
	return g;
}

static void
group_put(struct share *s, struct share_group *g)
{
	struct share_group **pp;

	if (g == NULL || g->nmembers > 0 || g->borrowed > 0)
		return;
	for (pp = &s->groups[share_hash(g->name)]; *pp != g; pp = &(*pp)->next)
		;
	*pp = g->next;
	free(g);
}

/* Change g's borrowed total by adding add and removing sub. */
static void
group_borrow(struct share *s, struct share_group *g, size_t add, size_t sub)
{
	int was = g->borrowed > 0;

	g->borrowed = g->borrowed + add - sub;
	if (!was && g->borrowed > 0)
		s->nborrowing++;
	else if (was && g->borrowed == 0)
		s->nborrowing--;
}

/* Move n to group g (its plugin), carrying what it borrows. */
static int
node_regroup(struct share *s, struct share_node *n, const char *plugin)
{
	struct share_group *g, *old = n->group;
	size_t b;

	if (old != NULL && strcmp(old->name, plugin) == 0)
		return 0;
	if ((g = group_get(s, plugin)) == NULL)
		return EGRESS_ERR_NOMEM;
	b = beyond(n->held, node_guarantee(s, n));
	g->nmembers++;
	group_borrow(s, g, b, 0);
	n->group = g;
	if (old != NULL) {
		old->nmembers--;
		group_borrow(s, old, 0, b);
		group_put(s, old);
	}
	return 0;
}

static struct share_node *
node_get(struct share *s, const char *name, const char *plugin)
{
	struct share_node *n, **pp;

	if ((n = node_find(s, name)) != NULL)
		return n;
	if (strlen(name) > SHARE_NAME_MAX ||
	    (n = calloc(1, sizeof(*n))) == NULL)
		return NULL;
	memcpy(n->name, name, strlen(name) + 1);
	if (node_regroup(s, n, plugin != NULL ? plugin : name) != 0) {
		free(n);
		return NULL;
	}
	pp = &s->nodes[share_hash(name)];
	n->next = *pp;
	*pp = n;
	return n;
}

/* Drop n once it holds nothing and is not configured. */
static void
node_put(struct share *s, struct share_node *n)
{
	struct share_node **pp;
	struct share_group *g = n->group;

	if (n->held > 0 || n->configured)
		return;
	for (pp = &s->nodes[share_hash(n->name)]; *pp != n; pp = &(*pp)->next)
		;
	*pp = n->next;
	g->nmembers--;
	free(n);
	group_put(s, g);
}

struct share *
share_new(size_t capacity, size_t guarantee, size_t per_instance_max)
{
	struct share *s;

	if (capacity == 0 || (s = calloc(1, sizeof(*s))) == NULL)
		return NULL;
	s->capacity = capacity;
	s->guarantee_max = guarantee;
	s->per_max = per_instance_max != 0 ? per_instance_max : capacity;
	return s;
}

void
share_free(struct share *s)
{
	struct share_node *n, *nn;
	struct share_group *g, *gn;
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < SHARE_BUCKETS; i++) {
		for (n = s->nodes[i]; n != NULL; n = nn) {
			nn = n->next;
			free(n);
		}
		for (g = s->groups[i]; g != NULL; g = gn) {
			gn = g->next;
			free(g);
		}
	}
	free(s);
}

/* Recount unmet and every group's borrowed total under guarantee g. */
static void
share_recount(struct share *s, size_t g)
{
	struct share_node *n;
	struct share_group *gr;
	size_t i;

	s->guarantee = g;
	s->unmet = 0;
	s->nborrowing = 0;
	for (i = 0; i < SHARE_BUCKETS; i++)
		for (gr = s->groups[i]; gr != NULL; gr = gr->next)
			gr->borrowed = 0;
	for (i = 0; i < SHARE_BUCKETS; i++)
		for (n = s->nodes[i]; n != NULL; n = n->next) {
			size_t ng = node_guarantee(s, n);

			s->unmet += ng - within(n->held, ng);
			group_borrow(s, n->group, beyond(n->held, ng), 0);
		}
}

int
share_configure(struct share *s, const struct share_member *m, size_t n)
{
	struct share_node *node, *next;
	size_t i, k = 0, g;

	/* Make every node first, so that nothing fails half-way after. */
	for (i = 0; i < n; i++)
		if (node_get(s, m[i].instance, m[i].plugin) == NULL)
			return EGRESS_ERR_NOMEM;
	for (i = 0; i < SHARE_BUCKETS; i++)
		for (node = s->nodes[i]; node != NULL; node = node->next)
			node->configured = 0;
	for (i = 0; i < n; i++) {
		node = node_find(s, m[i].instance);
		if (!node->configured)
			k++;
		node->configured = 1;
		if (node_regroup(s, node,
			m[i].plugin != NULL ? m[i].plugin : m[i].instance) !=
		    0)
			return EGRESS_ERR_NOMEM;
	}
	s->nconfigured = k;
	g = k == 0 ? 0 : min_sz(s->guarantee_max, s->capacity / k);
	share_recount(s, min_sz(g, s->per_max));
	/* Forget the nodes no longer configured that hold nothing. */
	for (i = 0; i < SHARE_BUCKETS; i++)
		for (node = s->nodes[i]; node != NULL; node = next) {
			next = node->next;
			node_put(s, node);
		}
	return 0;
}

int
share_acquire(struct share *s, const char *instance, const char *plugin,
    size_t n)
{
	struct share_node *node;
	size_t g, own, borrow, free_now, others, groups, cap;

	if (n == 0)
		return 0;
	if ((node = node_find(s, instance)) == NULL &&
	    (node = node_get(s, instance, plugin)) == NULL)
		return EGRESS_ERR_NOMEM;
	g = node_guarantee(s, node);
	if (n > s->capacity - s->total ||
	    n > s->per_max - min_sz(node->held, s->per_max)) {
		node_put(s, node);
		return EGRESS_ERR_BUDGET_EXHAUSTED;
	}
	own = min_sz(n, g - within(node->held, g));
	borrow = n - own;
	if (borrow > 0) {
		free_now = s->capacity - s->total;
		others = s->unmet - (g - within(node->held, g));
		groups = s->nborrowing + (node->group->borrowed == 0);
		cap = (s->capacity - s->nconfigured * s->guarantee) / groups;
		if (free_now - n < others ||
		    node->group->borrowed + borrow > (cap > 0 ? cap : 1)) {
			node_put(s, node);
			return EGRESS_ERR_BUDGET_EXHAUSTED;
		}
		group_borrow(s, node->group, borrow, 0);
	}
	node->held += n;
	s->total += n;
	s->unmet -= own;
	return 0;
}

void
share_release(struct share *s, const char *instance, size_t n)
{
	struct share_node *node;
	size_t g, b;

	if ((node = node_find(s, instance)) == NULL)
		return;
	if (n > node->held)
		n = node->held;
	g = node_guarantee(s, node);
	b = min_sz(n, beyond(node->held, g));
	group_borrow(s, node->group, 0, b);
	s->unmet += n - b;
	node->held -= n;
	s->total -= n;
	node_put(s, node);
}

const char *
share_group(const struct share *s, const char *instance)
{
	const struct share_node *n = node_find(s, instance);

	return n != NULL ? n->group->name : NULL;
}

size_t
share_held(const struct share *s, const char *instance)
{
	const struct share_node *n = node_find(s, instance);

	return n != NULL ? n->held : 0;
}

size_t
share_borrowed(const struct share *s, const char *instance)
{
	const struct share_node *n = node_find(s, instance);

	return n != NULL ? beyond(n->held, node_guarantee(s, n)) : 0;
}

size_t
share_unmet(const struct share *s, const char *instance)
{
	const struct share_node *n = node_find(s, instance);
	size_t g;

	if (n == NULL)
		return 0;
	g = node_guarantee(s, n);
	return g - within(n->held, g);
}

size_t
share_total(const struct share *s)
{
	return s->total;
}

size_t
share_guarantee(const struct share *s)
{
	return s->guarantee;
}

size_t
share_capacity(const struct share *s)
{
	return s->capacity;
}
