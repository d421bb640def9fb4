// Command imagebuild assembles the dctl container image without a container
// engine: one single-layer image per platform, FROM scratch, holding the
// static dctl binary of that platform at /usr/local/bin/dctl, the symbolic
// link /usr/bin/metacontroller to it (Metacontroller's Deployments run that
// command; dctl started under that name runs `dctl start`), the
// /etc/passwd and /etc/group of rootfs/ (user and group 65532, "nonroot"),
// and an OCI image index over them. CA certificates are not copied: dctl
// embeds Go's fallback roots (golang.org/x/crypto/x509roots/fallback).
//
// The output is reproducible: every tar entry has the same modification time
// (SOURCE_DATE_EPOCH, or the Unix epoch), uid and gid 0 with no user or group
// names (root owns every file; user 65532 reads and runs them), fixed modes
// and a sorted order, and the configs' creation time is that same time. It writes, under -out:
//
//	oci/                         an OCI image layout whose index.json holds one
//	                             entry, the multi-platform image index, named
//	                             <version> (`crane push` takes the directory)
//	dctl-<os>-<arch>.tar         a `docker save`-style archive of each image,
//	                             tagged <repository>:<version> (`docker load`,
//	                             `kind load image-archive`)
//
// Usage (the Makefile's `image` target runs it):
//
//	go run ./imagebuild -version 0.1.0 -repository ghcr.io/dcontroller/dctl \
//	    -binary linux/amd64=PATH -binary linux/arm64=PATH -out DIR
package main

import (
	"archive/tar"
	"bytes"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// rootfs holds the files every platform's image has besides dctl. The
// Dockerfile copies the same directory.
//
//go:embed rootfs
var rootfs embed.FS

// The image's fixed settings. The Dockerfile states the same (a test
// compares them).
const (
	binaryPath = "/usr/local/bin/dctl"
	// metacontrollerPath is a symbolic link to binaryPath.
	metacontrollerPath = "/usr/bin/metacontroller"
	user               = "65532:65532"
	envPath            = "PATH=/usr/local/bin:/usr/bin:/bin"
)

// binaries collects the repeated -binary OS/ARCH=PATH flags, in order.
type binaries []platformBinary

type platformBinary struct {
	platform v1.Platform
	path     string
}

func (b *binaries) String() string { return fmt.Sprint(*b) }

func (b *binaries) Set(s string) error {
	plat, p, ok := strings.Cut(s, "=")
	osName, arch, ok2 := strings.Cut(plat, "/")
	if !ok || !ok2 || osName == "" || arch == "" || p == "" {
		return fmt.Errorf("want OS/ARCH=PATH, got %q", s)
	}
	*b = append(*b, platformBinary{platform: v1.Platform{OS: osName, Architecture: arch}, path: p})
	return nil
}

func main() {
	var bins binaries
	flag.Var(&bins, "binary", "OS/ARCH=PATH of a static dctl binary; repeat for each platform of the index")
	version := flag.String("version", "", "image version: the tag and the org.opencontainers.image.version label")
	repository := flag.String("repository", "ghcr.io/dcontroller/dctl", "repository the archives are tagged with")
	source := flag.String("source", "https://github.com/dcontroller/dcontroller", "org.opencontainers.image.source label")
	licenses := flag.String("licenses", "Apache-2.0", "org.opencontainers.image.licenses label (an SPDX expression)")
	out := flag.String("out", "bin/image", "output directory")
	flag.Parse()
	if err := run(bins, *version, *repository, *source, *licenses, *out); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(bins binaries, version, repository, source, licenses, out string) error {
	if len(bins) == 0 || version == "" {
		return errors.New("-binary and -version are required")
	}
	tag, err := name.NewTag(repository + ":" + version)
	if err != nil {
		return err
	}
	created, err := sourceDate()
	if err != nil {
		return err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":    "dctl",
		"org.opencontainers.image.source":   source,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.licenses": licenses,
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var adds []mutate.IndexAddendum
	for _, b := range bins {
		img, err := platformImage(b, labels, created)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", b.platform.OS, b.platform.Architecture, err)
		}
		archive := filepath.Join(out, fmt.Sprintf("dctl-%s-%s.tar", b.platform.OS, b.platform.Architecture))
		if err := tarball.WriteToFile(archive, tag, img); err != nil {
			return err
		}
		plat := b.platform
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &plat}})
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)

	dir := filepath.Join(out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
		"io.containerd.image.name":          tag.Name(),
	})); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s (%d platforms)\n", dir, d, len(bins))
	return nil
}

// sourceDate is the time of every file and config: SOURCE_DATE_EPOCH
// (seconds) when set, else the Unix epoch.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
	}
	return time.Unix(n, 0).UTC(), nil
}

func platformImage(b platformBinary, labels map[string]string, created time.Time) (v1.Image, error) {
	bin, err := os.ReadFile(b.path)
	if err != nil {
		return nil, err
	}
	layerTar, err := rootLayer(bin, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = b.platform.OS, b.platform.Architecture, b.platform.Variant
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		User:       user,
		Env:        []string{envPath},
		Entrypoint: []string{binaryPath},
		Cmd:        []string{"start"},
		WorkingDir: "/",
		Labels:     labels,
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "imagebuild: rootfs/ and " + binaryPath,
		},
	})
}

// rootLayer is the uncompressed tar of the image's only layer: rootfs/ and
// dctl, with their parent directories, in path order.
func rootLayer(bin []byte, mtime time.Time) ([]byte, error) {
	type file struct {
		data []byte
		mode int64
		link string // a symbolic link to link when set
	}
	files := map[string]file{
		strings.TrimPrefix(binaryPath, "/"):         {data: bin, mode: 0o755},
		strings.TrimPrefix(metacontrollerPath, "/"): {mode: 0o777, link: binaryPath},
	}
	err := fs.WalkDir(rootfs, "rootfs", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := rootfs.ReadFile(p)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(p, "rootfs/")] = file{data: data, mode: 0o644}
		return nil
	})
	if err != nil {
		return nil, err
	}
	dirs := map[string]bool{}
	for p := range files {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	// A directory's name sorts before its entries' names ("etc/" < "etc/group").
	var names []string
	for d := range dirs {
		names = append(names, d+"/")
	}
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		hdr := &tar.Header{Name: n, ModTime: mtime}
		if strings.HasSuffix(n, "/") {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		} else if f := files[n]; f.link != "" {
			hdr.Typeflag, hdr.Mode, hdr.Linkname = tar.TypeSymlink, f.mode, f.link
		} else {
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, f.mode, int64(len(f.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if !strings.HasSuffix(n, "/") {
			if _, err := tw.Write(files[n].data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
