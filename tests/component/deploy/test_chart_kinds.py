"""The chart's RBAC and webhook rules name exactly the workload kinds' APIs
(bridge.workloads.REGISTRY): adding a kind is one module, one registry line and one chart
line, and this test says which chart line is missing."""

from __future__ import annotations

from chart_helpers import Helm
from test_chart import flatten_rules, name_of

from bridge.workloads import object_apis, related_apis

KIND_GROUPS = {api.group for api in object_apis()}


def test_the_schedulers_rbac_watches_every_kinds_object_and_nothing_else_of_their_groups(
    helm: Helm,
) -> None:
    """The scheduler keeps every kind's objects and the related objects they read in
    watch caches (scheduler.related): list and watch on each of their APIs."""
    role = helm.render().one("ClusterRole", name_of("scheduler"))
    rules = flatten_rules(role["rules"])
    for api in (*object_apis(), *related_apis()):
        verbs = rules.get((api.group, api.plural), ())
        assert {"list", "watch"} <= set(verbs), (api.group, api.plural)
    granted = {(g, r) for g, r in rules if g in KIND_GROUPS and "/" not in r}
    assert granted == {(a.group, a.plural) for a in object_apis()}


def test_the_workload_webhook_validates_every_kinds_object_and_nothing_else(helm: Helm) -> None:
    config = helm.render().of_kind("ValidatingWebhookConfiguration")
    hooks = [w for c in config for w in c["webhooks"] if w["name"].startswith("workloads")]
    assert hooks, "the workloads webhook is on by default"
    for hook in hooks:
        ruled = {
            (g, r) for rule in hook["rules"] for g in rule["apiGroups"] for r in rule["resources"]
        }
        assert ruled == {(a.group, a.plural) for a in object_apis()}, hook["name"]
