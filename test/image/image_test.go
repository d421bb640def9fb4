// Package image tests the dctl container image that `make image` builds
// without a container engine (hack/tools/imagebuild): its OCI layout, the
// config of each platform's image, the files of its layer, the dctl binary
// in it, that it is reproducible, and that the Dockerfile, the Helm chart and
// the kustomize manifests name the same image.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

var repoRoot = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}()

const (
	ociIndex    = "application/vnd.oci.image.index.v1+json"
	ociManifest = "application/vnd.oci.image.manifest.v1+json"
	ociConfig   = "application/vnd.oci.image.config.v1+json"
	ociLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
	// wantPlatforms are the platforms of the image index.
	wantPlatforms = "linux/amd64 linux/arm64"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type index struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Manifests     []descriptor      `json:"manifests"`
	Annotations   map[string]string `json:"annotations"`
}

type manifest struct {
	MediaType string       `json:"mediaType"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

type imageConfig struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Created      string `json:"created"`
	Config       struct {
		User       string            `json:"User"`
		Env        []string          `json:"Env"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		WorkingDir string            `json:"WorkingDir"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

var (
	buildOnce sync.Once
	buildErr  error
)

// buildImage runs `make image` once per test binary (make rebuilds only
// when a source file is newer than bin/image) and returns bin/image.
func buildImage(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		cmd := exec.Command("make", "image")
		cmd.Dir = repoRoot
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("make image: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(repoRoot, "bin", "image")
}

// blob reads a blob of an OCI layout and checks its digest and size.
func blob(t *testing.T, layoutDir string, d descriptor) []byte {
	t.Helper()
	alg, hexd, ok := strings.Cut(d.Digest, ":")
	if !ok || alg != "sha256" {
		t.Fatalf("digest %q is not sha256", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(layoutDir, "blobs", alg, hexd))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != hexd || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: content has digest sha256:%x and size %d, descriptor says size %d", d.Digest, sum, len(b), d.Size)
	}
	return b
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
}

// readLayout returns the OCI layout's top index.json, the image index it
// names, and the index's descriptor.
func readLayout(t *testing.T, dir string) (top index, idx index, desc descriptor) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	decode(t, b, &top)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != ociIndex {
		t.Fatalf("index.json must hold one image index (what `crane push DIR REF` pushes), got %+v", top.Manifests)
	}
	desc = top.Manifests[0]
	decode(t, blob(t, dir, desc), &idx)
	return top, idx, desc
}

// layerFile is one tar entry of the image's layer.
type layerFile struct {
	hdr  *tar.Header
	data []byte
}

func readLayer(t *testing.T, b []byte) []layerFile {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var files []layerFile
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, layerFile{hdr, data})
	}
}

// sourceDate is the time of every file and config of the image:
// SOURCE_DATE_EPOCH when set (make image passes it on), else the epoch.
func sourceDate(t *testing.T) time.Time {
	t.Helper()
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("SOURCE_DATE_EPOCH: %v", err)
	}
	return time.Unix(n, 0)
}

// dctlVersion is the version cmd/dctl/version.go defines.
func dctlVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "cmd", "dctl", "version.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^var version = "([^"]+)"$`).FindSubmatch(b)
	if m == nil {
		t.Fatal(`cmd/dctl/version.go has no line var version = "..."`)
	}
	return string(m[1])
}

// TestImage checks the image that `make image` builds: an OCI image index
// over linux/amd64 and linux/arm64, each image FROM scratch with one
// reproducible layer (dctl, /etc/passwd, /etc/group), run as 65532 with
// `dctl start`, labelled with the source, version and license; and that the
// host platform's dctl from the image is static and reports the version.
func TestImage(t *testing.T) {
	dir := buildImage(t)
	version := dctlVersion(t)
	layoutDir := filepath.Join(dir, "oci")
	_, idx, desc := readLayout(t, layoutDir)
	if got := desc.Annotations["org.opencontainers.image.ref.name"]; got != version {
		t.Errorf("layout ref.name %q, want the version %q", got, version)
	}
	if got, want := desc.Annotations["io.containerd.image.name"], "ghcr.io/dcontroller/dctl:"+version; got != want {
		t.Errorf("layout image name %q, want %q", got, want)
	}
	if idx.SchemaVersion != 2 || idx.MediaType != ociIndex {
		t.Errorf("image index schemaVersion %d mediaType %q", idx.SchemaVersion, idx.MediaType)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.title":    "dctl",
		"org.opencontainers.image.source":   "https://github.com/dcontroller/dcontroller",
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	if !reflect.DeepEqual(idx.Annotations, wantLabels) {
		t.Errorf("index annotations %v, want %v", idx.Annotations, wantLabels)
	}
	var platforms []string
	for _, m := range idx.Manifests {
		if m.Platform == nil || m.MediaType != ociManifest {
			t.Fatalf("index entry %+v: want an OCI image manifest with a platform", m)
		}
		plat := m.Platform.OS + "/" + m.Platform.Architecture
		platforms = append(platforms, plat)
		t.Run(strings.ReplaceAll(plat, "/", "-"), func(t *testing.T) {
			var man manifest
			decode(t, blob(t, layoutDir, m), &man)
			if man.MediaType != ociManifest || man.Config.MediaType != ociConfig || len(man.Layers) != 1 || man.Layers[0].MediaType != ociLayer {
				t.Fatalf("manifest %+v: want an OCI config and one gzipped OCI layer (FROM scratch)", man)
			}
			var cfg imageConfig
			decode(t, blob(t, layoutDir, man.Config), &cfg)
			if cfg.OS+"/"+cfg.Architecture != plat {
				t.Errorf("config platform %s/%s, index says %s", cfg.OS, cfg.Architecture, plat)
			}
			c := cfg.Config
			if c.User != "65532:65532" || !reflect.DeepEqual(c.Entrypoint, []string{"/usr/local/bin/dctl"}) || !reflect.DeepEqual(c.Cmd, []string{"start"}) {
				t.Errorf("config user %q entrypoint %q cmd %q, want 65532:65532 [/usr/local/bin/dctl] [start]", c.User, c.Entrypoint, c.Cmd)
			}
			if !reflect.DeepEqual(c.Labels, wantLabels) {
				t.Errorf("labels %v, want %v", c.Labels, wantLabels)
			}
			if created, err := time.Parse(time.RFC3339, cfg.Created); err != nil || !created.Equal(sourceDate(t)) {
				t.Errorf("created %q, want the fixed time %v (%v)", cfg.Created, sourceDate(t).UTC(), err)
			}
			files := readLayer(t, blob(t, layoutDir, man.Layers[0]))
			checkLayer(t, files, sourceDate(t))
			if runtime.GOOS+"/"+runtime.GOARCH == plat {
				runDctl(t, files, version)
			}
		})
	}
	sort.Strings(platforms)
	if strings.Join(platforms, " ") != wantPlatforms {
		t.Errorf("index platforms %v, want %s", platforms, wantPlatforms)
	}
	if !strings.Contains(wantPlatforms, runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("the host %s/%s is not a platform of the image: no dctl of the image ran", runtime.GOOS, runtime.GOARCH)
	}
}

// checkLayer checks the layer's entries: sorted, root-owned without names,
// at the fixed time, and exactly the expected files and modes.
func checkLayer(t *testing.T, files []layerFile, mtime time.Time) {
	t.Helper()
	want := map[string]string{
		"etc/": "755", "etc/group": "644", "etc/passwd": "644",
		"usr/": "755", "usr/local/": "755", "usr/local/bin/": "755", "usr/local/bin/dctl": "755",
		"usr/bin/": "755", "usr/bin/metacontroller": "777",
	}
	got := map[string]string{}
	var names []string
	for _, f := range files {
		h := f.hdr
		names = append(names, h.Name)
		got[h.Name] = strconv.FormatInt(h.Mode, 8)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(mtime) {
			t.Errorf("%s: uid %d gid %d uname %q gname %q mtime %v, want 0 0 \"\" \"\" %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime, mtime)
		}
		switch h.Name {
		case "etc/passwd":
			if !regexp.MustCompile(`(?m)^nonroot:x:65532:65532:`).Match(f.data) {
				t.Errorf("/etc/passwd has no user 65532:\n%s", f.data)
			}
		case "usr/bin/metacontroller":
			if h.Typeflag != tar.TypeSymlink || h.Linkname != "/usr/local/bin/dctl" {
				t.Errorf("/usr/bin/metacontroller: type %c link %q, want a symbolic link to /usr/local/bin/dctl", h.Typeflag, h.Linkname)
			}
		case "etc/group":
			if !regexp.MustCompile(`(?m)^nonroot:x:65532:`).Match(f.data) {
				t.Errorf("/etc/group has no group 65532:\n%s", f.data)
			}
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("layer entries are not sorted: %v", names)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layer entries and modes %v, want %v", got, want)
	}
}

// runDctl extracts dctl from the layer, checks that it is statically linked
// (no ELF interpreter: it runs FROM scratch) and runs `dctl version`.
func runDctl(t *testing.T, files []layerFile, version string) {
	t.Helper()
	var bin []byte
	for _, f := range files {
		if f.hdr.Name == "usr/local/bin/dctl" {
			bin = f.data
		}
	}
	p := filepath.Join(t.TempDir(), "dctl")
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("dctl has an ELF interpreter: not a static binary")
		}
	}
	ef.Close()
	// With no CA certificates in the image, TLS verifies against the roots
	// built into dctl.
	bi, err := buildinfo.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	fallback := false
	for _, d := range bi.Deps {
		fallback = fallback || d.Path == "golang.org/x/crypto/x509roots/fallback"
	}
	if !fallback {
		t.Errorf("dctl does not embed golang.org/x/crypto/x509roots/fallback: the image has no CA certificates")
	}
	if got := bi.Settings; !slices.Contains(got, debug.BuildSetting{Key: "CGO_ENABLED", Value: "0"}) || !slices.Contains(got, debug.BuildSetting{Key: "-trimpath", Value: "true"}) {
		t.Errorf("dctl build settings %v lack CGO_ENABLED=0 and -trimpath", got)
	}
	out, err := exec.Command(p, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("dctl version: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "dctl "+version; got != want {
		t.Errorf("dctl version printed %q, want %q", got, want)
	}
}

// TestImageReproducible assembles the image twice more from the binaries of
// `make image`, at another time and into other directories, and expects the
// same image index digest as bin/image/oci.
func TestImageReproducible(t *testing.T) {
	dir := buildImage(t)
	_, _, desc := readLayout(t, filepath.Join(dir, "oci"))
	version := dctlVersion(t)
	for i := 0; i < 2; i++ {
		out := t.TempDir()
		args := []string{"run", "./imagebuild", "-version", version, "-out", out}
		for _, p := range strings.Fields(wantPlatforms) {
			args = append(args, "-binary", p+"="+filepath.Join(dir, p, "dctl"))
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = filepath.Join(repoRoot, "hack", "tools")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		_, _, again := readLayout(t, filepath.Join(out, "oci"))
		if again.Digest != desc.Digest {
			t.Errorf("rebuild %d: index digest %s, bin/image/oci has %s", i, again.Digest, desc.Digest)
		}
	}
}

// TestDockerfile checks, without a container engine, that the Dockerfile
// describes the image `make image` builds: FROM scratch, the same files, the
// same user, environment, entry point, command and labels, and a static
// dctl built with the Makefile's flags.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Join continuation lines.
	df := strings.ReplaceAll(string(b), "\\\n", " ")
	froms := regexp.MustCompile(`(?m)^FROM (.+)$`).FindAllStringSubmatch(df, -1)
	if len(froms) != 2 || strings.TrimSpace(froms[1][1]) != "scratch" {
		t.Fatalf("want a build stage and a final stage FROM scratch, got FROM lines %q", froms)
	}
	final := df[strings.LastIndex(df, "\nFROM "):]
	build := df[:strings.LastIndex(df, "\nFROM ")]

	var cfg imageConfig
	dir := buildImage(t)
	layoutDir := filepath.Join(dir, "oci")
	_, idx, _ := readLayout(t, layoutDir)
	var man manifest
	decode(t, blob(t, layoutDir, idx.Manifests[0]), &man)
	decode(t, blob(t, layoutDir, man.Config), &cfg)
	c := cfg.Config

	instr := func(name string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`(?m)^`+name+` (.+)$`).FindAllStringSubmatch(final, -1) {
			out = append(out, strings.TrimSpace(m[1]))
		}
		return out
	}
	jsonList := func(v []string) string { b, _ := json.Marshal(v); return string(b) }
	for _, check := range []struct{ name, want string }{
		{"USER", c.User},
		{"WORKDIR", c.WorkingDir},
		{"ENTRYPOINT", jsonList(c.Entrypoint)},
		{"CMD", jsonList(c.Cmd)},
		{"ENV", strings.Join(c.Env, " ")},
	} {
		if got := instr(check.name); len(got) != 1 || strings.ReplaceAll(got[0], `", "`, `","`) != check.want {
			t.Errorf("Dockerfile %s %q, the image has %q", check.name, got, check.want)
		}
	}
	labels := map[string]string{}
	for _, l := range instr("LABEL") {
		for _, m := range regexp.MustCompile(`(\S+)="([^"]*)"`).FindAllStringSubmatch(l, -1) {
			labels[m[1]] = m[2]
		}
	}
	if !reflect.DeepEqual(labels, c.Labels) {
		t.Errorf("Dockerfile labels %v, the image has %v", labels, c.Labels)
	}
	copies := instr("COPY")
	if !reflect.DeepEqual(copies, []string{"hack/tools/imagebuild/rootfs/ /", "--from=build /out/dctl /usr/local/bin/dctl", "--from=build /out/links/ /"}) {
		t.Errorf("the final stage copies %q, want rootfs/ (what imagebuild embeds) and dctl", copies)
	}
	if !strings.Contains(build, "ln -s /usr/local/bin/dctl /out/links/usr/bin/metacontroller") {
		t.Errorf("the build stage must make the link /usr/bin/metacontroller to dctl, as the image has it")
	}
	if !strings.Contains(build, "CGO_ENABLED=0") || !strings.Contains(build, "go build -trimpath -o /out/dctl ./cmd/dctl") {
		t.Errorf("the build stage must build a static dctl with cgo off and -trimpath")
	}
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`CGO_ENABLED=0 .*\n\s*\$\(GO\) build -trimpath -o \$\(IMAGE_DIR\)/\$\$p/dctl \./cmd/dctl`).Match(mk) {
		t.Errorf("the Makefile's image recipe no longer builds dctl as the Dockerfile does (CGO_ENABLED=0, go build -trimpath)")
	}
	// Every directory the Go source lives in is copied into the build stage.
	for _, d := range []string{"api", "cmd", "internal", "pkg"} {
		if _, err := os.Stat(filepath.Join(repoRoot, d)); err == nil && !strings.Contains(build, "COPY "+d+"/ "+d+"/") {
			t.Errorf("the build stage does not copy %s/", d)
		}
	}
}

// TestVersionsAgree checks that dctl's version is the chart's appVersion,
// that the chart's default image is the one `make image` tags, and that the
// kustomize manifests use the same image.
func TestVersionsAgree(t *testing.T) {
	version := dctlVersion(t)
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, "charts/dcontroller/Chart.yaml", &chart)
	if chart.AppVersion != version {
		t.Errorf("Chart.yaml appVersion %q, dctl's version %q", chart.AppVersion, version)
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	readYAML(t, "charts/dcontroller/values.yaml", &values)
	tag := values.Image.Tag
	if tag == "" {
		tag = chart.AppVersion // the deployment's `.Values.image.tag | default .Chart.AppVersion`
	}
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	repo := regexp.MustCompile(`(?m)^IMAGE_REPO\s*\?=\s*(\S+)$`).FindSubmatch(mk)
	if repo == nil {
		t.Fatal("the Makefile sets no IMAGE_REPO")
	}
	if got, want := values.Image.Repository+":"+tag, string(repo[1])+":"+version; got != want {
		t.Errorf("the chart's default image is %s, make image builds %s", got, want)
	}
	var kust struct {
		Images []struct {
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	readYAML(t, "config/manager/kustomization.yaml", &kust)
	if len(kust.Images) != 1 || kust.Images[0].NewName+":"+kust.Images[0].NewTag != string(repo[1])+":"+version {
		t.Errorf("config/manager/kustomization.yaml images %+v, make image builds %s:%s", kust.Images, repo[1], version)
	}
}

func readYAML(t *testing.T, rel string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}
