package sweep_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v2"

	manifests "github.com/grdma/grdma/deploy/kubernetes"
	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/sweep"
)

// The deploy files (deploy/slurm, deploy/kubernetes) are what operators
// start a launched sweep with: these tests parse them and check the
// fields a sweep depends on.

// TestSbatchScript: bash accepts it; one task per node; srun runs sweep
// run with words the parser takes, each node's records to its own file;
// the report reads them all and decides the job's exit status.
func TestSbatchScript(t *testing.T) {
	const path = "../deploy/slurm/grdma-sweep.sbatch"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		if out, err := exec.Command(bash, "-n", path).CombinedOutput(); err != nil {
			t.Fatalf("bash -n: %v\n%s", err, out)
		}
	}
	script := string(b)
	for _, want := range []string{"#!/bin/bash\n", "\n#SBATCH --ntasks-per-node=1\n", "\n#SBATCH --exclusive\n"} {
		if !strings.Contains(script, want) {
			t.Errorf("missing %q", want)
		}
	}
	// The srun line, continuations joined.
	joined := strings.ReplaceAll(script, "\\\n", " ")
	sruns := regexp.MustCompile(`(?m)^\s*srun (.*)$`).FindAllStringSubmatch(joined, -1)
	if len(sruns) != 2 {
		t.Fatalf("want two srun lines, the sweep's and its retest's: %q", sruns)
	}
	for i, wants := range [][]string{
		{"--ntasks-per-node=1", `--output="$dir/%N.jsonl"`, `"$grdma" sweep run "$dev" "$@"`},
		{"--ntasks-per-node=1", `--output="$dir/retest/%N.jsonl"`, `"$grdma" sweep run "$dev" confirm "$dir/first.json"`},
	} {
		for _, want := range wants {
			if !strings.Contains(sruns[i][1], want) {
				t.Errorf("srun line %q lacks %q", sruns[i][1], want)
			}
		}
	}
	if !strings.Contains(script, `"$grdma" -j sweep report "$dir"/*.jsonl > "$dir/first.json"`) || !strings.Contains(script, "shopt -s nullglob") {
		t.Error("the retest must read the first pass's JSON report, and the report take no retest's files when none ran")
	}
	if _, err := grammar.ParseSweepRun([]string{"mlx5_0", "confirm", "first.json"}); err != nil {
		t.Errorf("the retest's words: %v", err)
	}
	// The retest keeps where and how the nodes meet (a GID index, a
	// port) and drops what the report holds, so its words parse.
	fn := regexp.MustCompile(`(?ms)^retest_words\(\) \{$.*?^\}$`).FindString(script)
	if fn == "" {
		t.Fatal("no retest_words function")
	}
	first := []string{"quick", "bw", "read", "lat", "size", "4096", "gid-index", "3", "port", "19000", "duration", "1s", "timeout", "1m", "start", "5m", "hosts", "/etc/fleet"}
	if bash, err := exec.LookPath("bash"); err == nil {
		out, err := exec.Command(bash, append([]string{"-c", fn + "\nretest_words \"$@\"", "sbatch"}, first...)...).Output()
		if err != nil {
			t.Fatalf("retest_words: %v", err)
		}
		words := strings.Fields(string(out))
		if got := strings.Join(words, " "); got != "gid-index 3 port 19000 timeout 1m start 5m" {
			t.Errorf("retest_words %v: %q", first, got)
		}
		if _, err := grammar.ParseSweepRun(append([]string{"mlx5_0", "confirm", "first.json"}, words...)); err != nil {
			t.Errorf("the retest's words %v: %v", words, err)
		}
		if _, err := grammar.ParseSweepRun(append([]string{"mlx5_0"}, first...)); err != nil {
			t.Errorf("the first run's words %v: %v", first, err)
		}
	}
	if _, err := grammar.ParseSweepRun([]string{"mlx5_0"}); err != nil {
		t.Errorf("the script's default words: %v", err)
	}
	report := regexp.MustCompile(`(?m)^"\$grdma" sweep report (.*)$`).FindStringSubmatch(script)
	if report == nil || !strings.Contains(report[1], `"$dir"/*.jsonl "$dir"/retest/*.jsonl`) || !strings.Contains(script, `exit "${PIPESTATUS[0]}"`) {
		t.Errorf("the report must read every node's file and give the job its status: %q", report)
	}
}

// TestKubernetesJob: the Indexed Job, its headless Service and the host
// list agree: pod INDEX is rank INDEX of the list, resolvable by the name
// the list gives it; every pod runs at once, one per node; the command
// parses and reads the mounted list.
func TestKubernetesJob(t *testing.T) {
	b, err := os.ReadFile("../deploy/kubernetes/sweep-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]map[any]any{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d map[any]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("YAML: %v", err)
		}
		docs[fmt.Sprint(d["kind"])] = d
	}
	job, svc, cm := docs["Job"], docs["Service"], docs["ConfigMap"]
	if job == nil || svc == nil || cm == nil {
		t.Fatalf("want a Job, a Service and a ConfigMap: %v", docs)
	}
	get := func(v any, path ...any) any {
		for _, k := range path {
			switch x := v.(type) {
			case map[any]any:
				v = x[k]
			case []any:
				v = x[k.(int)]
			default:
				t.Fatalf("%v: no %v", path, k)
			}
		}
		return v
	}
	ns := get(job, "metadata", "namespace")
	if get(svc, "metadata", "namespace") != ns || get(cm, "metadata", "namespace") != ns {
		t.Error("the Job, the Service and the ConfigMap must share a namespace")
	}
	jobName := get(job, "metadata", "name").(string)
	spec := get(job, "spec")
	completions := get(spec, "completions").(int)
	if get(spec, "completionMode") != "Indexed" || get(spec, "parallelism") != completions || get(spec, "backoffLimit") != 0 {
		t.Errorf("want an Indexed Job, parallelism = completions, no retries: %v", spec)
	}
	pod := get(spec, "template", "spec")
	if get(pod, "restartPolicy") != "Never" {
		t.Error("restartPolicy: Never (a restarted pod would run the sweep again alone)")
	}
	// DNS: subdomain = the headless Service, which selects the Job's pods
	// (the Job controller labels them job-name) even before they are ready.
	svcName := get(svc, "metadata", "name")
	if get(pod, "subdomain") != svcName || get(svc, "spec", "clusterIP") != "None" ||
		get(svc, "spec", "selector", "job-name") != jobName || get(svc, "spec", "publishNotReadyAddresses") != true {
		t.Errorf("the pods' names need a headless Service named as their subdomain, selecting job-name %s, publishing not-ready addresses", jobName)
	}
	anti := get(pod, "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution", 0)
	if get(anti, "topologyKey") != "kubernetes.io/hostname" || get(anti, "labelSelector", "matchLabels", "job-name") != jobName {
		t.Errorf("want one pod per node: %v", anti)
	}
	// The host list: rank i is pod i, named as the Service resolves it.
	hosts, err := sweep.ReadHosts(strings.NewReader(get(cm, "data", "hosts").(string)))
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != completions {
		t.Fatalf("the host list has %d hosts, the Job %d completions", len(hosts), completions)
	}
	for i, h := range hosts {
		if want := fmt.Sprintf("%s-%d.%s", jobName, i, svcName); h.String() != want {
			t.Errorf("rank %d is %s, pod %d resolves as %s", i, h, i, want)
		}
	}
	// The command: grdma sweep run with words the parser takes, the list
	// where the ConfigMap is mounted, the port the pod declares.
	c := get(pod, "containers", 0)
	var cmd []string
	for _, w := range get(c, "command").([]any) {
		cmd = append(cmd, w.(string))
	}
	if len(cmd) < 3 || cmd[1] != "sweep" || cmd[2] != "run" {
		t.Fatalf("command %q: want grdma sweep run", cmd)
	}
	req, err := grammar.ParseSweepRun(cmd[3:])
	if err != nil {
		t.Fatalf("command %q: %v", cmd, err)
	}
	mount := get(c, "volumeMounts", 0)
	vol := get(pod, "volumes", 0)
	if get(vol, "configMap", "name") != get(cm, "metadata", "name") || get(mount, "name") != get(vol, "name") ||
		req.HostsFile != get(mount, "mountPath").(string)+"/hosts" {
		t.Errorf("hosts %s is not the ConfigMap's mounted list", req.HostsFile)
	}
	if get(c, "ports", 0, "containerPort") != req.Port || get(svc, "spec", "ports", 0, "port") != req.Port {
		t.Errorf("the pod and the Service must declare the sweep's port %d", req.Port)
	}
	if req.Start < 60e9 {
		t.Errorf("start %v: pods start minutes apart", req.Start)
	}
	caps := get(c, "securityContext", "capabilities")
	if fmt.Sprint(get(caps, "add")) != "[IPC_LOCK]" || fmt.Sprint(get(caps, "drop")) != "[ALL]" {
		t.Errorf("capabilities: IPC_LOCK alone, got %v", caps)
	}
}

// TestKubernetesCoordinate: the coordinated sweep's Job parses, reads the
// mounted host list and credentials, asks for the modules its ConfigMap
// defines (a bw and a lat test naming the responders' secret), and runs
// with no privilege.
func TestKubernetesCoordinate(t *testing.T) {
	docs := map[string][]map[any]any{}
	dec := yaml.NewDecoder(strings.NewReader(manifests.SweepCoordinate))
	for {
		var d map[any]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("YAML: %v", err)
		}
		docs[fmt.Sprint(d["kind"])] = append(docs[fmt.Sprint(d["kind"])], d)
	}
	if len(docs["Job"]) != 1 || len(docs["ConfigMap"]) != 2 {
		t.Fatalf("want a Job and two ConfigMaps: %v", docs)
	}
	get := func(v any, path ...any) any {
		t.Helper()
		for _, k := range path {
			switch x := v.(type) {
			case map[any]any:
				v = x[k]
			case []any:
				v = x[k.(int)]
			default:
				t.Fatalf("%v: no %v", path, k)
			}
		}
		return v
	}
	cms := map[string]map[any]any{}
	for _, cm := range docs["ConfigMap"] {
		cms[get(cm, "metadata", "name").(string)] = cm
	}
	job := docs["Job"][0]
	pod := get(job, "spec", "template", "spec")
	if get(pod, "restartPolicy") != "Never" || get(job, "spec", "backoffLimit") != 0 {
		t.Error("restartPolicy Never, backoffLimit 0: a verdict is not retried")
	}
	c := get(pod, "containers", 0)
	var cmd []string
	for _, w := range get(c, "command").([]any) {
		cmd = append(cmd, w.(string))
	}
	if len(cmd) < 3 || cmd[1] != "sweep" || cmd[2] != "coordinate" {
		t.Fatalf("command %q: want grdma sweep coordinate", cmd)
	}
	req, err := grammar.ParseSweepCoordinate(cmd[3:])
	if err != nil {
		t.Fatalf("command %q: %v", cmd, err)
	}
	// Mounts: the hosts ConfigMap and the credentials Secret where the
	// command reads them.
	mounts := map[string]string{}
	for _, m := range get(c, "volumeMounts").([]any) {
		mounts[get(m, "name").(string)] = get(m, "mountPath").(string)
	}
	vols := map[string]map[any]any{}
	for _, v := range get(pod, "volumes").([]any) {
		vols[get(v, "name").(string)] = v.(map[any]any)
	}
	hostsVol, authVol := "", ""
	for name, v := range vols {
		if v["configMap"] != nil {
			hostsVol = name
		}
		if v["secret"] != nil {
			authVol = name
		}
	}
	hostsCM := cms[get(vols[hostsVol], "configMap", "name").(string)]
	if hostsCM == nil || !strings.HasPrefix(req.HostsFile, mounts[hostsVol]+"/") {
		t.Fatalf("hosts %s is not the mounted ConfigMap's", req.HostsFile)
	}
	key := strings.TrimPrefix(req.HostsFile, mounts[hostsVol]+"/")
	if hosts, err := sweep.ReadHosts(strings.NewReader(get(hostsCM, "data", key).(string))); err != nil || len(hosts) < 2 {
		t.Errorf("the host list: %v (%d hosts)", err, len(hosts))
	}
	if !strings.HasPrefix(req.HTTPConfig, mounts[authVol]+"/") {
		t.Errorf("http-config %s is not in the mounted Secret %s", req.HTTPConfig, mounts[authVol])
	}
	// The Secret's files readable by the pod's user: its group, fsGroup.
	sc := get(pod, "securityContext")
	if mode := get(vols[authVol], "secret", "defaultMode").(int); mode&0o040 == 0 || get(sc, "fsGroup") != get(sc, "runAsGroup") {
		t.Errorf("the Secret (mode %o) must be readable by the pod's group (fsGroup %v)", mode, get(sc, "fsGroup"))
	}
	if get(sc, "runAsNonRoot") != true || fmt.Sprint(get(c, "securityContext", "capabilities", "drop")) != "[ALL]" {
		t.Error("the coordinator needs no privilege")
	}
	// The modules it asks for: defined, of the right test, naming the
	// responders' secret.
	var probe struct {
		Modules map[string]struct {
			Prober string `yaml:"prober"`
			RC     struct {
				Test    string `yaml:"test"`
				KeyFile string `yaml:"key_file"`
			} `yaml:"rc"`
		} `yaml:"modules"`
	}
	if err := yaml.Unmarshal([]byte(get(cms["grdma-sweep-probe"], "data", "probe.yml").(string)), &probe); err != nil { // prober.ParseConfig, once merged, checks every field
		t.Fatalf("probe.yml: %v", err)
	}
	for _, m := range []struct{ name, test string }{{req.BWModule, "bw"}, {req.LatModule, "lat"}} {
		mod, ok := probe.Modules[m.name]
		if !ok || mod.Prober != "rc" || mod.RC.Test != m.test || mod.RC.KeyFile == "" {
			t.Errorf("module %q: want an rc %s test with the responders' key_file: %+v", m.name, m.test, mod)
		}
	}
	if req.ExporterPort != 10042 {
		t.Errorf("exporter-port %d: the DaemonSet's /probe is grdma-prober's 10042", req.ExporterPort)
	}
}
