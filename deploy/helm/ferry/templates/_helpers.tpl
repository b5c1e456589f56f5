{{/* The release's base name: the release's own when it holds the chart's name ("ferry"). */}}
{{- define "ferry.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "ferry.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of a component: include "ferry.selector" (list . "worker") */}}
{{- define "ferry.selector" -}}
app.kubernetes.io/name: {{ (index . 0).Chart.Name }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "ferry.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
The worker's worst case from SIGTERM to exit, in seconds (worker/service.py, Worker._drain and
_shutdown). Per route, one after the other: the release flushes the producer (FLUSH_TIMEOUT_S,
worker/copying/committer.py: 30), commits (COMMIT_DEADLINE_S, worker/service.py: 10) and waits for
the offset-map segments that commit wrote (SEGMENT_FLUSH_S, committer.py: 5); the close flushes
again (FLUSH_TIMEOUT_S: 30, only when the release's flush ran out). Once: the wait for the leader
to take the partitions away (LEAVE_WAIT_S, worker/service.py: 10), and 10 s to close the clients,
delete the worker's ZooKeeper nodes and exit. tests/unit/test_kubernetes_manifests.py holds these
numbers to the code's constants.
*/}}
{{- define "ferry.worker.drainPerRouteSeconds" -}}75{{- end -}}
{{- define "ferry.worker.drainOnceSeconds" -}}20{{- end -}}
{{- define "ferry.worker.terminationGracePeriodSeconds" -}}
{{- if kindIs "invalid" .Values.worker.terminationGracePeriodSeconds -}}
{{- add (mul (len .Values.routes) (include "ferry.worker.drainPerRouteSeconds" . | int)) (include "ferry.worker.drainOnceSeconds" . | int) -}}
{{- else -}}
{{- .Values.worker.terminationGracePeriodSeconds | int -}}
{{- end -}}
{{- end -}}

{{/* Does a scrape without a token get the controllers' metrics? (no auth, or open_reads) */}}
{{- define "ferry.controller.openMetrics" -}}
{{- $auth := .Values.controller.config.auth -}}
{{- if or (not $auth) (and $auth $auth.open_reads) -}}true{{- end -}}
{{- end -}}

{{/* The Ferry config every pod uses as it is: ferry.yaml. */}}
{{- define "ferry.config" -}}
{{- $controller := mustMergeOverwrite (deepCopy .Values.controller.config) (dict "rest_host" "0.0.0.0" "rest_port" .Values.controller.port) -}}
{{- $worker := mustMergeOverwrite (deepCopy .Values.worker.config) (dict "metrics_host" "0.0.0.0" "metrics_port" .Values.worker.port) -}}
{{- $config := mustMergeOverwrite (deepCopy .Values.config) (dict "zookeeper" .Values.zookeeper "clusters" .Values.clusters "routes" .Values.routes "controller" $controller "worker" $worker) -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The pods' security context: Pod Security "restricted". */}}
{{- define "ferry.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile: {type: RuntimeDefault}
{{- end -}}
{{- define "ferry.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{/* Environment and mounts every Ferry container shares: the Secrets, the config. */}}
{{- define "ferry.secretEnv" -}}
{{- range .Values.secretEnv }}
- name: {{ .name }}
  valueFrom: {secretKeyRef: {name: {{ .secretName }}, key: {{ .key }}}}
{{- end }}
{{- end -}}
{{- define "ferry.volumeMounts" -}}
- {name: config, mountPath: /etc/ferry, readOnly: true}
- {name: tmp, mountPath: /tmp}
{{- range .Values.secretFiles }}
- {name: {{ printf "secret-%s" .name }}, mountPath: {{ printf "/etc/ferry-secrets/%s" .name }}, readOnly: true}
{{- end }}
{{- end -}}
{{- define "ferry.volumes" -}}
- name: config
  configMap: {name: {{ include "ferry.fullname" . }}-config}
- name: tmp
  emptyDir: {}
{{- range .Values.secretFiles }}
- name: {{ printf "secret-%s" .name }}
  secret: {secretName: {{ .secretName }}, defaultMode: 0400}
{{- end }}
{{- end -}}

{{/* Spread a component's pods over nodes, unless the values give an affinity. */}}
{{- define "ferry.affinity" -}}
{{- $root := index . 0 -}}
{{- $given := index . 2 -}}
{{- if $given -}}
{{ toYaml $given }}
{{- else -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "ferry.selector" (list $root (index . 1)) | nindent 12 }}
{{- end -}}
{{- end -}}
