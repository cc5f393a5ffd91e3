{{/* vim: set filetype=mustache: */}}

{{- define "slurm-bridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "slurm-bridge.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "slurm-bridge.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "slurm-bridge.labels" -}}
helm.sh/chart: {{ include "slurm-bridge.chart" . }}
{{ include "slurm-bridge.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: slurm-bridge
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "slurm-bridge.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slurm-bridge.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of one component's objects; call with (dict "root" $ "component" "scheduler"). */}}
{{- define "slurm-bridge.componentLabels" -}}
{{ include "slurm-bridge.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "slurm-bridge.componentSelectorLabels" -}}
{{ include "slurm-bridge.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Name of a component's objects: <fullname>-<component>. */}}
{{- define "slurm-bridge.componentName" -}}
{{- printf "%s-%s" (include "slurm-bridge.fullname" .root) .component -}}
{{- end -}}

{{- define "slurm-bridge.serviceAccountName" -}}
{{- $sa := (index .root.Values .component).serviceAccount -}}
{{- if $sa.create -}}
{{- default (include "slurm-bridge.componentName" .) $sa.name -}}
{{- else -}}
{{- default "default" $sa.name -}}
{{- end -}}
{{- end -}}

{{- define "slurm-bridge.image" -}}
{{- $img := .Values.image -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{- define "slurm-bridge.jwtSecretName" -}}
{{- if .Values.slurm.jwt.create -}}
{{- default (printf "%s-jwt" (include "slurm-bridge.fullname" .)) .Values.slurm.jwt.existingSecret -}}
{{- else -}}
{{- required "slurm.jwt.existingSecret: name the Secret that holds the Slurm JWT" .Values.slurm.jwt.existingSecret -}}
{{- end -}}
{{- end -}}

{{- define "slurm-bridge.jwtFileName" -}}auth-token{{- end -}}

{{- define "slurm-bridge.admissionTLSSecretName" -}}
{{- printf "%s-admission-tls" (include "slurm-bridge.fullname" .) -}}
{{- end -}}

{{/* The mounted slurmrestd CA file, or "" when slurm.ca names no ConfigMap or Secret. */}}
{{- define "slurm-bridge.slurmCaFile" -}}
{{- if or .Values.slurm.ca.secret .Values.slurm.ca.configMap -}}
{{- printf "%s/ca.crt" .Values.slurm.ca.mountPath -}}
{{- end -}}
{{- end -}}
{{- define "slurm-bridge.tlsMountPath" -}}/tls{{- end -}}
{{- define "slurm-bridge.configMountPath" -}}/etc/slurm-bridge{{- end -}}

{{/*
The configuration file, as YAML: .Values.config plus the keys the chart owns (the token
file it mounts, the certificate it mounts, the Lease namespace). Parse it with fromYaml.
*/}}
{{- define "slurm-bridge.configYaml" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- if not (hasKey $cfg "leaderElectionNamespace") -}}
{{- $_ := set $cfg "leaderElectionNamespace" .Release.Namespace -}}
{{- end -}}
{{- $sel := $cfg.managedNamespaceSelector -}}
{{- if not (and $sel (or $sel.matchLabels $sel.matchExpressions)) -}}
{{- $_ := unset $cfg "managedNamespaceSelector" -}}
{{- end -}}
{{- $_ := set $cfg "slurmTokenFile" (printf "%s/%s" .Values.slurm.jwt.mountPath (include "slurm-bridge.jwtFileName" .)) -}}
{{- with include "slurm-bridge.slurmCaFile" . -}}
{{- $_ := set $cfg "slurmCaFile" . -}}
{{- end -}}
{{- $adm := deepCopy (default (dict) $cfg.admission) -}}
{{- $_ := set $adm "tlsCertFile" (printf "%s/tls.crt" (include "slurm-bridge.tlsMountPath" .)) -}}
{{- $_ := set $adm "tlsKeyFile" (printf "%s/tls.key" (include "slurm-bridge.tlsMountPath" .)) -}}
{{- if not (hasKey $adm "bridgeUsernames") -}}
{{- $_ := set $adm "bridgeUsernames" (include "slurm-bridge.bridgeUsernames" . | fromYamlArray) -}}
{{- end -}}
{{- $_ := set $cfg "admission" $adm -}}
{{- toYaml $cfg -}}
{{- end -}}

{{- define "slurm-bridge.metricsPort" -}}
{{- dig "metricsPort" 8080 .Values.config | int -}}
{{- end -}}
{{- define "slurm-bridge.healthPort" -}}
{{- dig "healthPort" 8081 .Values.config | int -}}
{{- end -}}
{{- define "slurm-bridge.admissionPort" -}}
{{- dig "admission" "port" 9443 .Values.config | int -}}
{{- end -}}

{{- define "slurm-bridge.leaseNamespace" -}}
{{- dig "leaderElectionNamespace" .Release.Namespace .Values.config -}}
{{- end -}}

{{/*
Sanity checks no JSON schema can express (they compare values with each other or with
the release). Included once, from configmap.yaml.
*/}}
{{- define "slurm-bridge.validate" -}}
{{- $names := default (list) .Values.config.managedNamespaces -}}
{{- if has .Release.Namespace $names -}}
{{- fail (printf "config.managedNamespaces: %q is the release namespace; install the chart into a namespace of its own (e.g. slurm-bridge-system): the webhooks always exclude the bridge's own namespace" .Release.Namespace) -}}
{{- end -}}
{{- if eq (include "slurm-bridge.healthPort" .) "0" -}}
{{- fail "config.healthPort: must not be 0 in the chart (the probes use it)" -}}
{{- end -}}
{{- if not (dig "leaderElection" true .Values.config) -}}
{{- range $c := list "scheduler" "controller" -}}
{{- $v := index $.Values $c -}}
{{- if and $v.enabled (gt (int $v.replicas) 1) -}}
{{- fail (printf "%s.replicas: %d replicas need config.leaderElection=true (two active replicas would submit twice)" $c (int $v.replicas)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.slurm.ca.secret .Values.slurm.ca.configMap -}}
{{- fail "slurm.ca: set configMap or secret, not both" -}}
{{- end -}}
{{- if and .Values.slurm.jwt.create (not .Values.slurm.jwt.token) -}}
{{- fail "slurm.jwt.token: required when slurm.jwt.create=true" -}}
{{- end -}}
{{- end -}}

{{/*
The webhooks' namespaceSelectors, a YAML list: one selector for the managedNamespaces
(by the kubernetes.io/metadata.name label the API server sets on every namespace) and one
for managedNamespaceSelector (minus the listed names, so no namespace is called twice).
Both exclude the release namespace. An empty list is refused: these webhooks never go
cluster-wide (the Slurm-node guard's own entry covers every namespace on purpose).
*/}}
{{- define "slurm-bridge.webhookNamespaceSelectors" -}}
{{- $names := default (list) .Values.config.managedNamespaces -}}
{{- $own := .Release.Namespace -}}
{{- $out := list -}}
{{- if $names -}}
{{- $out = append $out (dict "matchExpressions" (list
      (dict "key" "kubernetes.io/metadata.name" "operator" "In" "values" $names)
      (dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" (list $own)))) -}}
{{- end -}}
{{- $sel := .Values.config.managedNamespaceSelector -}}
{{- if and $sel (or $sel.matchLabels $sel.matchExpressions) -}}
{{- $exprs := concat (default (list) $sel.matchExpressions) (list
      (dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" (uniq (append $names $own)))) -}}
{{- $s := dict "matchExpressions" $exprs -}}
{{- if $sel.matchLabels -}}
{{- $_ := set $s "matchLabels" $sel.matchLabels -}}
{{- end -}}
{{- $out = append $out $s -}}
{{- end -}}
{{- if not $out -}}
{{- fail "config.managedNamespaces / config.managedNamespaceSelector: at least one must name a namespace (the webhooks are never cluster-wide)" -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The part every webhook entry shares; call with (dict "root" $ "path" "/x" "selector" {...} "caBundle" "..."). */}}
{{- define "slurm-bridge.webhookCommon" -}}
{{- $a := .root.Values.admission -}}
admissionReviewVersions: [v1]
sideEffects: None
failurePolicy: {{ $a.failurePolicy }}
timeoutSeconds: {{ $a.timeoutSeconds }}
matchPolicy: Equivalent
clientConfig:
  service:
    name: {{ include "slurm-bridge.componentName" (dict "root" .root "component" "admission") }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: {{ $a.service.port }}
  {{- with .caBundle }}
  caBundle: {{ . }}
  {{- end }}
namespaceSelector:
  {{- toYaml .selector | nindent 2 }}
{{- end -}}

{{/*
The bridge's own identities (request.userInfo.username of its scheduler and controller):
what admission.bridgeUsernames defaults to, and who the webhooks' matchCondition trusts.
*/}}
{{- define "slurm-bridge.bridgeUsernames" -}}
{{- $out := list -}}
{{- range $c := list "scheduler" "controller" -}}
{{- $sa := include "slurm-bridge.serviceAccountName" (dict "root" $ "component" $c) -}}
{{- $out = append $out (printf "system:serviceaccount:%s:%s" $.Release.Namespace $sa) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
The validating webhooks' matchCondition: true (call the webhook) for every CREATE and for
writes by anyone but the trusted writers. A stopped webhook (failurePolicy Fail) then
refuses new pods and users' updates, never the bridge's finalizer removal, the garbage
collector, the namespace controller, the Job controller or the kubelet. CEL; no
extension functions, so that every CEL implementation evaluates it alike.
*/}}
{{- define "slurm-bridge.trustedWriterCondition" -}}
{{- $a := .Values.admission -}}
{{- $users := concat (include "slurm-bridge.bridgeUsernames" . | fromYamlArray) (dig "admission" "bridgeUsernames" (list) .Values.config) $a.trustedUsernames | uniq -}}
{{- $quoted := list -}}
{{- range $users }}{{- $quoted = append $quoted (printf "%q" .) -}}{{- end -}}
{{- $trusted := list (printf "request.userInfo.username in [%s]" (join ", " $quoted)) "request.userInfo.username.startsWith(\"system:node:\")" -}}
{{- if $a.trustKubeSystem -}}
{{- $trusted = append $trusted "request.userInfo.username.startsWith(\"system:serviceaccount:kube-system:\")" -}}
{{- /* kube-controller-manager without --use-service-account-credentials writes as itself */ -}}
{{- $trusted = append $trusted "request.userInfo.username == \"system:kube-controller-manager\"" -}}
{{- end -}}
{{- printf "request.operation == \"CREATE\" || !(%s)" (join " || " $trusted) -}}
{{- end -}}

{{/*
Who the Slurm-node guard's webhook never calls for: the exempt creators
(config.admission.nodeGuardExemptUsernames, the DaemonSet controller by default) and the
nodes (a kubelet creates only mirror pods of its own node: NodeRestriction).
*/}}
{{- define "slurm-bridge.nodeGuardCondition" -}}
{{- $users := dig "admission" "nodeGuardExemptUsernames" (list "system:serviceaccount:kube-system:daemon-set-controller") .Values.config -}}
{{- $quoted := list -}}
{{- range $users }}{{- $quoted = append $quoted (printf "%q" .) -}}{{- end -}}
{{- printf "!(request.userInfo.username in [%s]) && !request.userInfo.username.startsWith(\"system:node:\")" (join ", " $quoted) -}}
{{- end -}}

{{/*
The chart-generated webhook certificate, as YAML (parse it with fromYaml): crt, key, caCrt,
caKey (base64), caBundle (base64 PEM: the CA, plus the previous CA after a CA renewal),
notAfter, caNotAfter (unix seconds). Arguments: root, name, dnsNames, now (unix seconds),
existing (the Secret as `lookup` returns it; empty: none). The CA and the leaf are kept
while more than generated.renewBeforeDays of their validity remain (known from the
Secret's annotations); a renewed leaf is signed by the kept CA, so the caBundle only
changes when the CA itself is renewed, and then still trusts the old CA.
*/}}
{{- define "slurm-bridge.generatedTLS" -}}
{{- $tls := .root.Values.admission.tls -}}
{{- $old := dict -}}
{{- $oldAnn := dict -}}
{{- if and .existing .existing.data -}}
{{- $old = .existing.data -}}
{{- $oldAnn = dig "metadata" "annotations" (dict) .existing -}}
{{- end -}}
{{- $now := int64 .now -}}
{{- $days := int $tls.generated.validityDays -}}
{{- $margin := mul (int $tls.generated.renewBeforeDays) 86400 -}}
{{- $caAfter := index $oldAnn "slurm-bridge.slinky.slurm.net/ca-not-after" | default "0" | int64 -}}
{{- $leafAfter := index $oldAnn "slurm-bridge.slinky.slurm.net/not-after" | default "0" | int64 -}}
{{- $fresh := add $now (mul $days 86400) -}}
{{- $ca := dict -}}
{{- $caCrt := "" -}}{{- $caKey := "" -}}{{- $caBundle := "" -}}
{{- $keepCA := and (index $old "ca.crt") (index $old "ca.key") (gt (sub $caAfter $now) $margin) -}}
{{- if $keepCA -}}
{{- $ca = buildCustomCert (index $old "ca.crt") (index $old "ca.key") -}}
{{- $caCrt = index $old "ca.crt" -}}
{{- $caKey = index $old "ca.key" -}}
{{- $caBundle = $caCrt -}}
{{- else -}}
{{- $ca = genCA (printf "%s-ca" .name) $days -}}
{{- $caAfter = $fresh -}}
{{- $caCrt = b64enc $ca.Cert -}}
{{- $caKey = b64enc $ca.Key -}}
{{- $caBundle = $caCrt -}}
{{- if index $old "ca.crt" -}}
{{- $caBundle = b64enc (printf "%s%s" $ca.Cert (index $old "ca.crt" | b64dec)) -}}
{{- end -}}
{{- end -}}
{{- $crt := index $old "tls.crt" -}}
{{- $key := index $old "tls.key" -}}
{{- if not (and $keepCA $crt $key (gt (sub $leafAfter $now) $margin)) -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" .name .root.Release.Namespace) nil .dnsNames $days $ca -}}
{{- $crt = b64enc $cert.Cert -}}
{{- $key = b64enc $cert.Key -}}
{{- $leafAfter = $fresh -}}
{{- end -}}
{{- dict "crt" $crt "key" $key "caCrt" $caCrt "caKey" $caKey "caBundle" $caBundle "notAfter" (toString $leafAfter) "caNotAfter" (toString $caAfter) | toYaml -}}
{{- end -}}


{{/*
The workload kinds' APIs (bridge/workloads: one line per kind's resource; a new kind adds
its line here and nowhere else in the chart). The scheduler lists and watches each
(rbac.yaml), and the workloads webhook validates their pod templates
(admission-webhooks.yaml). `versions`: the API versions the webhook matches (default
every one). tests/component/deploy/test_chart_kinds.py checks this list against the
registry.
*/}}
{{- define "slurm-bridge.workloadApis" -}}
- {group: scheduling.x-k8s.io, resource: podgroups}
- {group: scheduling.k8s.io, resource: workloads}
- {group: scheduling.k8s.io, resource: podgroups}
- {group: scheduling.k8s.io, resource: compositepodgroups}
- {group: jobset.x-k8s.io, resource: jobsets}
- {group: leaderworkerset.x-k8s.io, resource: leaderworkersets}
- {group: batch, resource: jobs, versions: [v1]}
{{- end -}}
