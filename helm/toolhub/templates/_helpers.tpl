{{/* Names ---------------------------------------------------------------------------------- */}}

{{- define "toolhub.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "toolhub.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "toolhub.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels: common labels, and the selector labels of one component. */}}
{{- define "toolhub.labels" -}}
helm.sh/chart: {{ include "toolhub.chart" . }}
{{ include "toolhub.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "toolhub.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolhub.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* usage: include "toolhub.componentLabels" (dict "root" $ "component" "gateway") */}}
{{- define "toolhub.componentSelector" -}}
{{ include "toolhub.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- with .queue }}
toolhub.io/queue: {{ . }}
{{- end }}
{{- end }}

{{- define "toolhub.componentLabels" -}}
{{ include "toolhub.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- with .queue }}
toolhub.io/queue: {{ . }}
{{- end }}
{{- end }}

{{- define "toolhub.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "toolhub.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image: repository:tag (tag defaults to appVersion), or repository@digest. */}}
{{- define "toolhub.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag | toString }}
{{- if eq (lower $tag) "latest" }}
{{- fail "image.tag must be pinned: \"latest\" is not allowed" }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* Restricted Pod Security settings: not configurable on purpose. */}}
{{- define "toolhub.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "toolhub.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Timing ---------------------------------------------------------------------------------- */}}

{{/* Worker grace period: never below the longest foreground call plus Celery's soft shutdown. */}}
{{- define "toolhub.workerGracePeriod" -}}
{{- $floor := add .Values.config.maxForegroundSeconds .Values.worker.softShutdownSeconds 30 }}
{{- max (int .Values.worker.terminationGracePeriodSeconds) $floor }}
{{- end }}

{{/* KEDA cooldown: always longer than the worker grace period (KEDA docs, Airflow chart). */}}
{{- define "toolhub.kedaCooldown" -}}
{{- $floor := add (include "toolhub.workerGracePeriod" . | int) 30 }}
{{- max (int .Values.autoscaling.keda.cooldownPeriod) $floor }}
{{- end }}

{{/* Secrets and Redis ------------------------------------------------------------------------ */}}

{{- define "toolhub.secretName" -}}
{{- include "toolhub.fullname" . }}
{{- end }}

{{- define "toolhub.apiTokenSecret" -}}
{{- default (include "toolhub.secretName" .) .Values.auth.existingSecret }}
{{- end }}

{{- define "toolhub.fleetKeySecret" -}}
{{- default (include "toolhub.secretName" .) .Values.fleetKey.existingSecret }}
{{- end }}

{{/* The gateway's named API keys: a Secret the operator made from `toolhub keys create
--file keys.json`, mounted read-only (a directory, not a subPath, so an update of the Secret
reaches the running gateway, which re-reads the file when it changes). */}}
{{- define "toolhub.keysEnv" -}}
{{- if .Values.auth.keys.existingSecret }}
- name: TOOLHUB_KEYS_FILE
  value: /etc/toolhub-keys/keys.json
{{- end }}
{{- end }}

{{- define "toolhub.keysVolumeMounts" -}}
{{- if .Values.auth.keys.existingSecret }}
- name: keys
  mountPath: /etc/toolhub-keys
  readOnly: true
{{- end }}
{{- end }}

{{- define "toolhub.keysVolumes" -}}
{{- with .Values.auth.keys.existingSecret }}
- name: keys
  secret:
    secretName: {{ . }}
    # Readable by the pod's group (fsGroup 10001) only.
    defaultMode: 0440
    items:
      - key: {{ $.Values.auth.keys.secretKey }}
        path: keys.json
{{- end }}
{{- end }}

{{- define "toolhub.flowerSecret" -}}
{{- default (include "toolhub.secretName" .) .Values.flower.existingSecret }}
{{- end }}

{{/* Name of the Secret with the Redis password, or "" when Redis needs none. */}}
{{- define "toolhub.redisPasswordSecret" -}}
{{- if .Values.redis.enabled }}
{{- if .Values.redis.auth.enabled }}
{{- default (include "toolhub.secretName" .) .Values.redis.auth.existingSecret }}
{{- end }}
{{- else if .Values.externalRedis.existingSecret }}
{{- .Values.externalRedis.existingSecret }}
{{- else if .Values.externalRedis.password }}
{{- include "toolhub.secretName" . }}
{{- end }}
{{- end }}

{{- define "toolhub.redisPasswordKey" -}}
{{- if .Values.redis.enabled }}{{ .Values.redis.auth.passwordKey }}{{ else }}{{ .Values.externalRedis.passwordKey }}{{ end }}
{{- end }}

{{- define "toolhub.redisHost" -}}
{{- if .Values.redis.enabled }}
{{- printf "%s-redis" (include "toolhub.fullname" .) }}
{{- else if .Values.externalRedis.sentinel.enabled }}
{{- .Values.externalRedis.host }}
{{- else }}
{{- required "externalRedis.host is required when redis.enabled is false" .Values.externalRedis.host }}
{{- end }}
{{- end }}

{{- define "toolhub.redisPort" -}}
{{- if .Values.redis.enabled }}6379{{ else }}{{ .Values.externalRedis.port }}{{ end }}
{{- end }}

{{- define "toolhub.redisDatabase" -}}
{{- if .Values.redis.enabled }}0{{ else }}{{ .Values.externalRedis.database }}{{ end }}
{{- end }}

{{- define "toolhub.redisTLS" -}}
{{- if and (not .Values.redis.enabled) .Values.externalRedis.tls }}true{{ else }}false{{ end }}
{{- end }}

{{/*
Env vars that give a container its Redis URL. REDIS_PASSWORD comes first so that the kubelet
expands $(REDIS_PASSWORD) inside TOOLHUB_REDIS_URL: the password never appears in a manifest.
*/}}
{{- define "toolhub.redisEnv" -}}
{{- $secret := include "toolhub.redisPasswordSecret" . }}
{{- $scheme := ternary "rediss" "redis" (eq (include "toolhub.redisTLS" .) "true") }}
{{- $userinfo := "" }}
{{- if $secret }}
{{- $user := ternary "" .Values.externalRedis.username .Values.redis.enabled }}
{{- $userinfo = printf "%s:$(REDIS_PASSWORD)@" $user }}
{{- if $user }}
- name: REDIS_USERNAME
  value: {{ $user | quote }}
{{- end }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ include "toolhub.redisPasswordKey" . }}
{{- end }}
{{- if eq (include "toolhub.redisSentinel" .) "true" }}
{{- $sentinel := .Values.externalRedis.sentinel }}
{{- $query := list }}
{{- if $sentinel.passwordKey }}
- name: REDIS_SENTINEL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ required "externalRedis.existingSecret (or password) holds the Sentinel password" $secret }}
      key: {{ $sentinel.passwordKey }}
{{- $query = append $query "sentinel_password=$(REDIS_SENTINEL_PASSWORD)" }}
{{- end }}
{{- if .Values.externalRedis.tls }}{{ $query = append $query "ssl=true" }}{{ end }}
{{- if $sentinel.tls }}{{ $query = append $query "sentinel_ssl=true" }}{{ end }}
- name: TOOLHUB_REDIS_URL
  value: {{ printf "redis+sentinel://%s%s/%s/%s%s" $userinfo (join "," (required "externalRedis.sentinel.hosts needs at least one Sentinel" $sentinel.hosts)) $sentinel.service (include "toolhub.redisDatabase" .) (ternary (printf "?%s" (join "&" $query)) "" (gt (len $query) 0)) | quote }}
{{- else }}
- name: TOOLHUB_REDIS_URL
  value: {{ printf "%s://%s%s:%s/%s" $scheme $userinfo (include "toolhub.redisHost" .) (include "toolhub.redisPort" .) (include "toolhub.redisDatabase" .) | quote }}
{{- end }}
{{- end }}

{{/* "true" when toolhub reaches an external Redis through Sentinel. */}}
{{- define "toolhub.redisSentinel" -}}
{{- if and (not .Values.redis.enabled) .Values.externalRedis.sentinel.enabled }}true{{ else }}false{{ end }}
{{- end }}

{{/* Name of the ConfigMap with the operator policy, or "" when there is none (the strict
defaults). */}}
{{- define "toolhub.policyConfigMap" -}}
{{- if .Values.config.policyExistingConfigMap }}
{{- .Values.config.policyExistingConfigMap }}
{{- else if .Values.config.policy }}
{{- printf "%s-policy" (include "toolhub.fullname" .) }}
{{- end }}
{{- end }}

{{/* Env shared by the gateway and the workers; the gateway signs with the fleet key, the
workers verify with it; both load the same operator policy. */}}
{{- define "toolhub.commonEnv" -}}
{{ include "toolhub.redisEnv" . | trim }}
- name: TOOLHUB_FLEET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "toolhub.fleetKeySecret" . }}
      key: {{ .Values.fleetKey.secretKey }}
- name: TOOLHUB_CONFIG
  value: /etc/toolhub/toolset.yaml
{{- if include "toolhub.policyConfigMap" . }}
- name: TOOLHUB_POLICY
  value: /etc/toolhub-policy/policy.yaml
{{- end }}
- name: TOOLHUB_WORKSPACE
  value: {{ .Values.workspace.mountPath | quote }}
- name: TOOLHUB_LOG_FORMAT
  value: {{ .Values.config.logFormat | quote }}
- name: TOOLHUB_MAX_FOREGROUND_SECONDS
  value: {{ .Values.config.maxForegroundSeconds | quote }}
- name: HOME
  value: /tmp
{{- include "toolhub.otelEnv" . }}
{{- end }}

{{/* The OTEL_* variables of the gateway and the workers (docs/tracing.md), when otel is on. */}}
{{- define "toolhub.otelEnv" -}}
{{- if .Values.otel.enabled }}
{{- $endpoint := .Values.otel.endpoint }}
{{- if and (not $endpoint) .Values.otel.collector.enabled }}
{{- $port := ternary "4317" "4318" (eq .Values.otel.protocol "grpc") }}
{{- $endpoint = printf "http://%s-otel-collector:%s" (include "toolhub.fullname" .) $port }}
{{- end }}
{{- if not $endpoint }}
{{- fail "otel.enabled needs otel.endpoint or otel.collector.enabled" }}
{{- end }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .Values.otel.protocol | quote }}
- name: OTEL_TRACES_SAMPLER
  value: {{ .Values.otel.sampler | quote }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ .Values.otel.samplerArg | quote }}
{{- end }}
{{- end }}

{{/* Volumes shared by the gateway and the workers. */}}
{{- define "toolhub.commonVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .tmpSizeLimit | default "256Mi" }}
- name: config
  configMap:
    name: {{ .root.Values.config.existingConfigMap | default (printf "%s-toolset" (include "toolhub.fullname" .root)) }}
    items:
      - key: {{ ternary .root.Values.config.existingConfigMapKey "toolset.yaml" (not (empty .root.Values.config.existingConfigMap)) }}
        path: toolset.yaml
{{- with include "toolhub.policyConfigMap" .root }}
- name: policy
  configMap:
    name: {{ . }}
    items:
      - key: {{ ternary $.root.Values.config.policyExistingConfigMapKey "policy.yaml" (not (empty $.root.Values.config.policyExistingConfigMap)) }}
        path: policy.yaml
{{- end }}
- name: workspace
{{- if .root.Values.workspace.persistence.enabled }}
  persistentVolumeClaim:
    claimName: {{ .root.Values.workspace.persistence.existingClaim | default (printf "%s-workspace" (include "toolhub.fullname" .root)) }}
{{- else }}
  emptyDir: {}
{{- end }}
{{- end }}

{{- define "toolhub.commonVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: config
  mountPath: /etc/toolhub
  readOnly: true
{{- if include "toolhub.policyConfigMap" . }}
- name: policy
  mountPath: /etc/toolhub-policy
  readOnly: true
{{- end }}
- name: workspace
  mountPath: {{ .Values.workspace.mountPath }}
{{- end }}

{{/* Pod-level settings shared by every toolhub pod. */}}
{{- define "toolhub.podSpecCommon" -}}
serviceAccountName: {{ include "toolhub.serviceAccountName" . }}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- include "toolhub.podSecurityContext" . | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "toolhub.podAnnotations" -}}
checksum/config: {{ toYaml .Values.config.toolset | sha256sum }}
{{- with .Values.config.policy }}
checksum/policy: {{ toYaml . | sha256sum }}
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}

