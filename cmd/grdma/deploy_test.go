//go:build !grdma_noprometheus

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grdma/grdma/pingmesh"
	"go.yaml.in/yaml/v2"
)

// The deploy/ files of the exporter, the pingmesh and /probe: the
// exporter containers' arguments are flags the exporter takes, the
// Prometheus configurations name the ports and Services the manifests
// define, and promtool checks the one its Debian build can read.

// k8sObject is what the tests read of a manifest.
type k8sObject struct {
	Kind     string
	Metadata struct{ Name string }
	Spec     struct {
		ClusterIP string `yaml:"clusterIP"`
		Ports     []struct{ Name string }
		Template  struct {
			Spec struct {
				Containers []struct {
					Name    string
					Command []string
					Args    []string
					Env     []struct{ Name, Value string }
					Ports   []struct {
						Name          string
						ContainerPort int `yaml:"containerPort"`
					}
				}
			}
		}
	}
	Data map[string]string
}

func readManifests(t *testing.T, files ...string) []k8sObject {
	t.Helper()
	var objs []k8sObject
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("../../deploy/kubernetes", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var o k8sObject
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

func TestDeployKubernetes(t *testing.T) {
	objs := readManifests(t, "daemonset.yaml", "pingmesh.yaml")
	ports := map[string]bool{}
	services := map[string][]string{}
	exporters := 0
	for _, o := range objs {
		switch o.Kind {
		case "DaemonSet":
			for _, c := range o.Spec.Template.Spec.Containers {
				for _, p := range c.Ports {
					ports[p.Name] = true
				}
				if !slices.Equal(c.Command, []string{"/grdma-prometheus", "exporter"}) {
					continue
				}
				exporters++
				args := slices.Clone(c.Args)
				for i, a := range args {
					for _, e := range c.Env {
						a = strings.ReplaceAll(a, "$("+e.Name+")", e.Value)
					}
					args[i] = a
				}
				if err := (&app{}).exporterCommand().ParseFlags(args); err != nil {
					t.Errorf("container %s: %v", c.Name, err)
				}
			}
		case "Service":
			for _, p := range o.Spec.Ports {
				services[o.Metadata.Name] = append(services[o.Metadata.Name], p.Name)
			}
		case "ConfigMap":
			if o.Metadata.Name == "grdma-pingmesh-targets" {
				targets, err := pingmesh.ParseTargets("mesh.yml", []byte(o.Data["mesh.yml"]))
				if err != nil || len(targets) != 4 || targets[0].Labels["tor"] != "tor1" {
					t.Errorf("the ConfigMap's targets: %v, %v", targets, err)
				}
			}
		}
	}
	if exporters != 2 {
		t.Errorf("%d exporter containers in the DaemonSet, want 2 (grdma-exporter, grdma-prober)", exporters)
	}
	// The Prometheus configuration keeps targets by these names.
	b, err := os.ReadFile("../../deploy/prometheus/prometheus-kubernetes.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName        string `yaml:"job_name"`
			RelabelConfigs []struct {
				Regex  string
				Action string
			} `yaml:"relabel_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, sc := range cfg.ScrapeConfigs {
		for _, r := range sc.RelabelConfigs {
			if r.Action != "keep" {
				continue
			}
			name, port, _ := strings.Cut(r.Regex, ";")
			switch {
			case name == "grdma-exporter":
				if !ports[port] {
					t.Errorf("job %s keeps port %q, which the DaemonSet does not name", sc.JobName, port)
				}
			case !slices.Contains(services[name], port):
				t.Errorf("job %s keeps service %s port %q; services: %v", sc.JobName, name, port, services)
			}
		}
	}
	if !regexp.MustCompile(`grdma-prober\.monitoring\.svc:10042`).Match(b) || !slices.Contains(services["grdma-prober"], "prober") {
		t.Error("the /probe job's prober Service and the manifests disagree")
	}
}

// TestDeployPrometheusStatic: promtool accepts the static configuration
// (Debian's promtool has no kubernetes_sd_configs: TestDeployKubernetes
// checks that one against the manifests instead).
func TestDeployPrometheusStatic(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool (Debian package prometheus)")
	}
	cmd := exec.Command(promtool, "check", "config", "prometheus-static.yml")
	cmd.Dir = "../../deploy/prometheus"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}
