package deploytest

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/dfs-project/dfs/internal/coordinator"
	"github.com/dfs-project/dfs/internal/envconf"
	"github.com/dfs-project/dfs/internal/storagenode"
)

// The parts of the Kubernetes objects deploy/k8s uses and these tests read.
// Decoding is not strict: these are checks of meaning, not a schema.
type (
	k8sMeta struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	}
	k8sObject struct {
		APIVersion string            `yaml:"apiVersion"`
		Kind       string            `yaml:"kind"`
		Metadata   k8sMeta           `yaml:"metadata"`
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`
		file       string
		node       *yaml.Node
	}
	k8sService struct {
		Spec struct {
			ClusterIP                string            `yaml:"clusterIP"`
			PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
			Selector                 map[string]string `yaml:"selector"`
			Ports                    []struct {
				Name       string `yaml:"name"`
				Port       int    `yaml:"port"`
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	k8sWorkload struct {
		Spec struct {
			Replicas    int    `yaml:"replicas"`
			ServiceName string `yaml:"serviceName"`
			Selector    struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Template struct {
				Metadata k8sMeta    `yaml:"metadata"`
				Spec     k8sPodSpec `yaml:"spec"`
			} `yaml:"template"`
			VolumeClaimTemplates []struct {
				Metadata k8sMeta `yaml:"metadata"`
				Spec     struct {
					Resources struct {
						Requests map[string]string `yaml:"requests"`
					} `yaml:"resources"`
				} `yaml:"spec"`
			} `yaml:"volumeClaimTemplates"`
		} `yaml:"spec"`
	}
	k8sPodSpec struct {
		EnableServiceLinks            *bool `yaml:"enableServiceLinks"`
		TerminationGracePeriodSeconds int   `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               struct {
			RunAsNonRoot bool `yaml:"runAsNonRoot"`
			RunAsUser    int  `yaml:"runAsUser"`
			FSGroup      int  `yaml:"fsGroup"`
		} `yaml:"securityContext"`
		Containers []k8sContainer `yaml:"containers"`
		Volumes    []struct {
			Name string `yaml:"name"`
		} `yaml:"volumes"`
	}
	k8sContainer struct {
		Name  string `yaml:"name"`
		Image string `yaml:"image"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort string `yaml:"containerPort"`
		} `yaml:"ports"`
		EnvFrom []struct {
			ConfigMapRef *struct {
				Name string `yaml:"name"`
			} `yaml:"configMapRef"`
			SecretRef *struct {
				Name string `yaml:"name"`
			} `yaml:"secretRef"`
		} `yaml:"envFrom"`
		Env []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom *struct {
				FieldRef *struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
				SecretKeyRef *struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		StartupProbe   *k8sProbe `yaml:"startupProbe"`
		ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
		LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
		Lifecycle      struct {
			PostStart *k8sHook `yaml:"postStart"`
			PreStop   *k8sHook `yaml:"preStop"`
		} `yaml:"lifecycle"`
		Resources struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	k8sProbe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"`
		} `yaml:"httpGet"`
	}
	k8sHook struct {
		Exec *struct {
			Command []string `yaml:"command"`
		} `yaml:"exec"`
	}
)

// k8sObjects reads every document of every manifest under deploy/k8s.
func k8sObjects(t *testing.T) []k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "k8s", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var objs []k8sObject
	for _, f := range files {
		r, err := os.Open(f)
		require.NoError(t, err)
		dec := yaml.NewDecoder(r)
		for {
			var node yaml.Node
			err := dec.Decode(&node)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, "%s parses", f)
			var obj k8sObject
			require.NoError(t, node.Decode(&obj), f)
			obj.file, obj.node = filepath.Base(f), &node
			objs = append(objs, obj)
		}
		r.Close()
	}
	return objs
}

// k8sSet indexes the objects by kind and name.
type k8sSet map[string]k8sObject

func (s k8sSet) get(t *testing.T, kind, name string) k8sObject {
	t.Helper()
	obj, ok := s[kind+"/"+name]
	require.True(t, ok, "deploy/k8s has no %s %s", kind, name)
	return obj
}

func decodeAs[T any](t *testing.T, obj k8sObject) T {
	t.Helper()
	var v T
	require.NoError(t, obj.node.Decode(&v), "%s %s", obj.Kind, obj.Metadata.Name)
	return v
}

func loadK8s(t *testing.T) k8sSet {
	t.Helper()
	set := k8sSet{}
	for _, obj := range k8sObjects(t) {
		key := obj.Kind + "/" + obj.Metadata.Name
		require.NotContains(t, set, key, "%s is defined twice", key)
		set[key] = obj
	}
	return set
}

// TestK8sManifests: the documents parse, are the expected objects, all in
// the one namespace, which `kubectl apply -f deploy/k8s/` creates first.
func TestK8sManifests(t *testing.T) {
	objs := k8sObjects(t)
	var kinds []string
	var namespace k8sObject
	for _, obj := range objs {
		kinds = append(kinds, obj.APIVersion+" "+obj.Kind+" "+obj.Metadata.Name)
		if obj.Kind == "Namespace" {
			namespace = obj
		}
	}
	slices.Sort(kinds)
	require.Equal(t, []string{
		"apps/v1 Deployment coordinator",
		"apps/v1 StatefulSet storage-node-zone-a",
		"apps/v1 StatefulSet storage-node-zone-b",
		"apps/v1 StatefulSet storage-node-zone-c",
		"policy/v1 PodDisruptionBudget storage-node",
		"v1 ConfigMap coordinator-config",
		"v1 ConfigMap storage-node-config",
		"v1 Namespace dfs",
		"v1 Secret dfs-secrets",
		"v1 Service coordinator",
		"v1 Service storage-node",
	}, kinds)
	for _, obj := range objs {
		if obj.Kind != "Namespace" {
			require.Equal(t, namespace.Metadata.Name, obj.Metadata.Namespace, "%s %s", obj.Kind, obj.Metadata.Name)
			require.Less(t, namespace.file, obj.file, "the namespace's file applies first")
		}
	}
}

// podEnv resolves a container's environment the way the kubelet would for
// the first pod of a workload: envFrom first, then env, with $(VAR)
// references to variables defined before and the downward API's pod name.
func podEnv(t *testing.T, set k8sSet, podName string, c k8sContainer) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			for k, v := range set.get(t, "ConfigMap", from.ConfigMapRef.Name).Data {
				env[k] = v
			}
		case from.SecretRef != nil:
			for k, v := range set.get(t, "Secret", from.SecretRef.Name).StringData {
				env[k] = v
			}
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = ref.ReplaceAllStringFunc(e.Value, func(m string) string {
				name := ref.FindStringSubmatch(m)[1]
				v, ok := env[name]
				require.True(t, ok, "%s refers to $(%s), which is not defined before it", e.Name, name)
				return v
			})
		case e.ValueFrom.FieldRef != nil:
			require.Equal(t, "metadata.name", e.ValueFrom.FieldRef.FieldPath, e.Name)
			env[e.Name] = podName
		case e.ValueFrom.SecretKeyRef != nil:
			v, ok := set.get(t, "Secret", e.ValueFrom.SecretKeyRef.Name).StringData[e.ValueFrom.SecretKeyRef.Key]
			require.True(t, ok, "%s: the secret has key %s", e.Name, e.ValueFrom.SecretKeyRef.Key)
			env[e.Name] = v
		default:
			t.Fatalf("%s: a valueFrom this test does not resolve", e.Name)
		}
	}
	return env
}

// k8sDaemon is one dfs container of a workload, resolved.
type k8sDaemon struct {
	binary    string
	workload  k8sWorkload
	container k8sContainer
	env       map[string]string
}

// k8sDaemons returns the coordinator's and the storage node's containers.
func k8sDaemons(t *testing.T, set k8sSet) map[string]k8sDaemon {
	t.Helper()
	out := map[string]k8sDaemon{}
	for _, w := range []struct{ kind, name, binary, pod string }{
		{"Deployment", "coordinator", coordinatorBin, "coordinator-abc12-xyz34"},
		{"StatefulSet", "storage-node-zone-a", storageNodeBin, "storage-node-zone-a-0"},
	} {
		wl := decodeAs[k8sWorkload](t, set.get(t, w.kind, w.name))
		require.Len(t, wl.Spec.Template.Spec.Containers, 1, w.name)
		c := wl.Spec.Template.Spec.Containers[0]
		require.Regexp(t, `(^|/)dfs-`+w.binary+`(:|$)`, c.Image, "%s runs the %s image", w.name, w.binary)
		out[w.binary] = k8sDaemon{binary: w.binary, workload: wl, container: c, env: podEnv(t, set, w.pod, c)}
	}
	return out
}

// TestK8sContainers: each daemon's container sets only variables it reads,
// with values it accepts, listens where its probes and Service look, probes
// routes it serves, keeps its data on a volume, and runs as the image's user.
func TestK8sContainers(t *testing.T) {
	set := loadK8s(t)
	for binary, d := range k8sDaemons(t, set) {
		t.Run(binary, func(t *testing.T) {
			c, pod := d.container, d.workload.Spec.Template
			vars := readVars(t, binary)
			for _, k := range sortedKeys(d.env) {
				require.True(t, vars[k], "%s's container gets %s, which %s does not read", binary, k, binary)
			}
			require.NoError(t, loadConfig(binary, d.env), "%s's resolved environment", binary)

			require.Len(t, c.Ports, 1)
			require.Equal(t, "http", c.Ports[0].Name)
			require.Equal(t, d.env["SERVER_PORT"], c.Ports[0].ContainerPort, "%s: containerPort is SERVER_PORT", binary)
			for name, p := range map[string]*k8sProbe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
				require.NotNil(t, p, "%s has a %s probe", binary, name)
				require.NotNil(t, p.HTTPGet, "%s %s probe", binary, name)
				require.Equal(t, "http", p.HTTPGet.Port, "%s %s probe port", binary, name)
				requireRoute(t, binary, "GET", p.HTTPGet.Path, "deploy/k8s "+binary+" "+name+" probe")
			}
			require.Equal(t, "/health/ready", c.ReadinessProbe.HTTPGet.Path, binary)
			require.Equal(t, "/health/live", c.LivenessProbe.HTTPGet.Path, binary)
			require.NotEmpty(t, c.Resources.Requests["cpu"], binary)
			require.NotEmpty(t, c.Resources.Requests["memory"], binary)
			require.NotEmpty(t, c.Resources.Limits["memory"], binary)

			dataDir := d.env[map[string]string{coordinatorBin: "DATA_DIRECTORY", storageNodeBin: "STORAGE_DATA_DIRECTORY"}[binary]]
			var backed bool
			for _, m := range c.VolumeMounts {
				if m.MountPath != dataDir {
					continue
				}
				for _, v := range pod.Spec.Volumes {
					backed = backed || v.Name == m.Name
				}
				for _, v := range d.workload.Spec.VolumeClaimTemplates {
					backed = backed || v.Metadata.Name == m.Name
				}
			}
			require.True(t, backed, "%s: %s is a mounted volume", binary, dataDir)

			sc := pod.Spec.SecurityContext
			require.True(t, sc.RunAsNonRoot, binary)
			user := lastOf(t, parseDockerfile(t, dockerfiles[binary]).final().all("USER"), "USER")
			require.Equal(t, user, strconv.Itoa(sc.RunAsUser)+":"+strconv.Itoa(sc.FSGroup), "%s runs as the image's user, which owns its volume", binary)
			require.NotNil(t, pod.Spec.EnableServiceLinks, binary)
			require.False(t, *pod.Spec.EnableServiceLinks, "%s: service links would add variables nobody reads", binary)
			for k, v := range d.workload.Spec.Selector.MatchLabels {
				require.Equal(t, v, pod.Metadata.Labels[k], "%s's selector matches its pods", binary)
			}
		})
	}
}

// serviceFor returns the Service named name, checking it selects the
// workload's pods and forwards to the container's named port.
func serviceFor(t *testing.T, set k8sSet, name string, d k8sDaemon) k8sService {
	t.Helper()
	svc := decodeAs[k8sService](t, set.get(t, "Service", name))
	require.NotEmpty(t, svc.Spec.Selector, name)
	for k, v := range svc.Spec.Selector {
		require.Equal(t, v, d.workload.Spec.Template.Metadata.Labels[k], "Service %s selects the %s pods", name, d.binary)
	}
	require.Len(t, svc.Spec.Ports, 1, name)
	require.Equal(t, d.container.Ports[0].Name, svc.Spec.Ports[0].TargetPort, "Service %s forwards to the container's port", name)
	return svc
}

// TestK8sTopology: several coordinators over PostgreSQL behind a Service;
// storage nodes whose ids, addresses and claims follow from the pod names
// through a headless Service that publishes pods before they are ready.
func TestK8sTopology(t *testing.T) {
	set := loadK8s(t)
	ds := k8sDaemons(t, set)
	ns := set.get(t, "Namespace", "dfs").Metadata.Name
	coord, node := ds[coordinatorBin], ds[storageNodeBin]

	require.GreaterOrEqual(t, coord.workload.Spec.Replicas, 2, "the coordinator is stateless and replicated")
	require.Regexp(t, `^postgres(ql)?://`, coord.env["DATABASE_URL"], "several coordinators share one PostgreSQL; the embedded store is per process")
	coordSvc := serviceFor(t, set, "coordinator", coord)
	require.Equal(t, "http://coordinator."+ns+".svc.cluster.local:"+strconv.Itoa(coordSvc.Spec.Ports[0].Port), node.env["COORDINATOR_URL"],
		"nodes register with the coordinator Service")

	sts := node.workload.Spec
	// One StatefulSet per zone: together at least REPLICATION_FACTOR nodes in
	// at least REPLICATION_FACTOR zones, each set's pods pinned to the zone
	// its STORAGE_ZONE names, all behind the one headless Service.
	coordCfg, err := coordinator.LoadConfig(envconf.FromMap(coord.env))
	require.NoError(t, err)
	var replicas int
	zones := map[string]string{}
	for _, z := range []string{"a", "b", "c"} {
		name := "storage-node-zone-" + z
		wl := decodeAs[k8sWorkload](t, set.get(t, "StatefulSet", name))
		env := podEnv(t, set, name+"-0", wl.Spec.Template.Spec.Containers[0])
		zone := env["STORAGE_ZONE"]
		require.NotEmpty(t, zone, "%s sets STORAGE_ZONE", name)
		require.NotContains(t, zones, zone, "%s and %s share a zone", name, zones[zone])
		zones[zone] = name
		require.Equal(t, sts.ServiceName, wl.Spec.ServiceName, name)
		require.Equal(t, name+"-0."+sts.ServiceName+"."+ns+".svc.cluster.local", env["STORAGE_ADVERTISED_HOST"])
		var aff struct {
			Spec struct {
				Template struct {
					Spec struct {
						Affinity struct {
							NodeAffinity struct {
								Required struct {
									Terms []struct {
										MatchExpressions []struct {
											Key      string   `yaml:"key"`
											Operator string   `yaml:"operator"`
											Values   []string `yaml:"values"`
										} `yaml:"matchExpressions"`
									} `yaml:"nodeSelectorTerms"`
								} `yaml:"requiredDuringSchedulingIgnoredDuringExecution"`
							} `yaml:"nodeAffinity"`
						} `yaml:"affinity"`
					} `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		require.NoError(t, set.get(t, "StatefulSet", name).node.Decode(&aff))
		terms := aff.Spec.Template.Spec.Affinity.NodeAffinity.Required.Terms
		require.Len(t, terms, 1, name)
		require.Len(t, terms[0].MatchExpressions, 1, name)
		e := terms[0].MatchExpressions[0]
		require.Equal(t, "topology.kubernetes.io/zone", e.Key, name)
		require.Equal(t, "In", e.Operator, name)
		require.Equal(t, []string{zone}, e.Values, "%s runs in the zone it reports", name)
		replicas += wl.Spec.Replicas
	}
	require.GreaterOrEqual(t, replicas, coordCfg.ReplicationFactor, "at least REPLICATION_FACTOR nodes")
	require.GreaterOrEqual(t, len(zones), coordCfg.ReplicationFactor, "at least REPLICATION_FACTOR zones")
	headless := serviceFor(t, set, sts.ServiceName, node)
	require.Equal(t, "None", headless.Spec.ClusterIP, "the StatefulSet's service is headless")
	require.True(t, headless.Spec.PublishNotReadyAddresses, "a node's name resolves before it is ready and while it drains")

	var idFromPod bool
	for _, e := range node.container.Env {
		idFromPod = idFromPod || (e.Name == "STORAGE_NODE_ID" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil)
	}
	require.True(t, idFromPod, "STORAGE_NODE_ID comes from the pod name")
	require.Equal(t, "storage-node-zone-a-0", node.env["STORAGE_NODE_ID"])
	require.Equal(t, "storage-node-zone-a-0."+sts.ServiceName+"."+ns+".svc.cluster.local", node.env["STORAGE_ADVERTISED_HOST"])
	require.Equal(t, node.env["SERVER_PORT"], node.env["STORAGE_ADVERTISED_PORT"])
	require.Len(t, sts.VolumeClaimTemplates, 1)
	require.NotEmpty(t, sts.VolumeClaimTemplates[0].Spec.Resources.Requests["storage"])

	pdb := set.get(t, "PodDisruptionBudget", "storage-node")
	var spec struct {
		Spec struct {
			MaxUnavailable int `yaml:"maxUnavailable"`
			Selector       struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
		} `yaml:"spec"`
	}
	require.NoError(t, pdb.node.Decode(&spec))
	require.Equal(t, 1, spec.Spec.MaxUnavailable, "one drain at a time")
	require.NotEmpty(t, spec.Spec.Selector.MatchLabels)
	for k, v := range spec.Spec.Selector.MatchLabels {
		require.Equal(t, v, sts.Template.Metadata.Labels[k], "the budget covers the storage pods of every zone")
	}
	require.Equal(t, spec.Spec.Selector.MatchLabels, headless.Spec.Selector, "the budget covers what the headless Service selects")
}

// recordedCall is one request a fake coordinator received.
type recordedCall struct{ method, path, query string }

// fakeCoordinator answers status to every request and records it.
func fakeCoordinator(t *testing.T, status int) (*httptest.Server, func() []recordedCall) {
	t.Helper()
	var (
		mu    sync.Mutex
		calls []recordedCall
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, recordedCall{r.Method, r.URL.Path, r.URL.RawQuery})
		mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []recordedCall {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
}

// hookTimeout is the -timeout of a healthprobe command line, or its default.
func hookTimeout(t *testing.T, argv []string) time.Duration {
	t.Helper()
	if i := slices.Index(argv, "-timeout"); i >= 0 {
		d, err := time.ParseDuration(argv[i+1])
		require.NoError(t, err)
		return d
	}
	return 5 * time.Second
}

// TestK8sHooks runs the storage node's lifecycle hooks, with the built probe
// and the container's resolved environment, against a fake coordinator: the
// preStop hook deregisters the pod's node and waits for the drain, within the
// grace period; the postStart hook re-admits it, accepting "never seen" and
// "not deregistered".
func TestK8sHooks(t *testing.T) {
	set := loadK8s(t)
	ds := k8sDaemons(t, set)
	node := ds[storageNodeBin]
	hooks := node.container.Lifecycle
	require.NotNil(t, hooks.PreStop, "the storage node has a preStop hook")
	require.NotNil(t, hooks.PostStart, "the storage node has a postStart hook")

	shipped := strings.Join(parseDockerfile(t, dockerfiles[storageNodeBin]).final().all("COPY"), " ")
	for name, h := range map[string]*k8sHook{"preStop": hooks.PreStop, "postStart": hooks.PostStart} {
		require.NotNil(t, h.Exec, name)
		argv := h.Exec.Command
		require.Equal(t, "/usr/local/bin/"+probeBin, argv[0], "%s runs the probe; the image has no shell", name)
		require.Contains(t, shipped, "/out/"+probeBin, "the storage-node image ships the probe")
		require.NotContains(t, strings.Join(argv, " "), "$(", "%s: Kubernetes does not expand $(VAR) in hooks", name)
	}

	tests := []struct {
		hook    string
		argv    []string
		status  int
		code    int
		method  string
		route   string
		query   string
		pattern string
	}{
		{"preStop", hooks.PreStop.Exec.Command, http.StatusOK, 0, "DELETE", "/api/nodes/storage-node-zone-a-0", "wait=true", "/api/nodes/{nodeId}"},
		{"preStop, drain unfinished", hooks.PreStop.Exec.Command, http.StatusAccepted, 1, "DELETE", "/api/nodes/storage-node-zone-a-0", "wait=true", "/api/nodes/{nodeId}"},
		// An unsafe drain is refused and the hook does not force it: the pod
		// stops as a failed node would, keeping its copies (see the README).
		{"preStop, drain refused as unsafe", hooks.PreStop.Exec.Command, http.StatusConflict, 1, "DELETE", "/api/nodes/storage-node-zone-a-0", "wait=true", "/api/nodes/{nodeId}"},
		{"postStart, rejoined", hooks.PostStart.Exec.Command, http.StatusOK, 0, "POST", "/api/nodes/storage-node-zone-a-0/rejoin", "", "/api/nodes/{nodeId}/rejoin"},
		{"postStart, a new node", hooks.PostStart.Exec.Command, http.StatusNotFound, 0, "POST", "/api/nodes/storage-node-zone-a-0/rejoin", "", "/api/nodes/{nodeId}/rejoin"},
		{"postStart, not deregistered", hooks.PostStart.Exec.Command, http.StatusConflict, 0, "POST", "/api/nodes/storage-node-zone-a-0/rejoin", "", "/api/nodes/{nodeId}/rejoin"},
	}
	for _, tt := range tests {
		t.Run(tt.hook, func(t *testing.T) {
			srv, calls := fakeCoordinator(t, tt.status)
			env := map[string]string{}
			for k, v := range node.env {
				env[k] = v
			}
			env["COORDINATOR_URL"] = srv.URL
			code, out := runProbe(t, tt.argv[1:], env)
			require.Equal(t, tt.code, code, out)
			require.Equal(t, []recordedCall{{tt.method, tt.route, tt.query}}, calls())
			require.Equal(t, tt.pattern, routePattern(t, coordinatorBin, tt.method, tt.route), "the coordinator serves it")
		})
	}

	cm := set.get(t, "ConfigMap", "coordinator-config").Data
	cfg, err := coordinator.LoadConfig(envconf.FromMap(cm))
	require.NoError(t, err)
	preStop := hookTimeout(t, hooks.PreStop.Exec.Command)
	require.Greater(t, preStop, cfg.DrainTimeout, "the preStop hook outwaits DRAIN_TIMEOUT")
	grace := time.Duration(node.workload.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	require.GreaterOrEqual(t, grace, preStop+storagenode.DefaultShutdownTimeout,
		"the grace period covers the drain and the node's own shutdown")
}
