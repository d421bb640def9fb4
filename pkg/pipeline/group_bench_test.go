package pipeline

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/dcontroller/dcontroller/internal/cputime"
	"github.com/dcontroller/dcontroller/pkg/dbsp"
)

// Benchmarks of @groupBy and @gather over one large group: loading G
// members (one delta, as a controller's first list) and one member update
// in a group of G. Run with
//
//	go test ./pkg/pipeline -run '^$' -bench 'GroupLoad|GroupUpdate' -benchmem
//
// Loading must grow as G log G at most (32k/2k members: at most 20x the
// CPU); an update costs O(G), the size of the group's new output.

var groupSizes = []int{2_000, 8_000, 32_000}

const oneGroupBySpec = `{"@groupBy": ["$.metadata.namespace", "$.metadata.name"]}`

const oneGatherSpec = `{"@gather": ["$.metadata.namespace", "$.status.podIP"]}`

var groupSpecs = []struct{ name, spec string }{{"groupBy", oneGroupBySpec}, {"gather", oneGatherSpec}}

func BenchmarkGroupLoad(b *testing.B) {
	for _, s := range groupSpecs {
		for _, g := range groupSizes {
			b.Run(fmt.Sprintf("%s/G=%d", s.name, g), func(b *testing.B) {
				pods := benchPods(g, 1)
				load := dbsp.FromDocuments(pods...)
				b.ReportAllocs()
				b.ResetTimer()
				var cpu time.Duration
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					p := compileBench(b, s.spec, "Pod")
					runtime.GC() // the previous load's garbage is not this one's cost
					start, _ := cputime.Process()
					b.StartTimer()
					out, err := p.Process(map[string]*dbsp.ZSet{"Pod": load})
					b.StopTimer()
					end, _ := cputime.Process()
					cpu += end - start
					if err != nil {
						b.Fatal(err)
					}
					if out.Len() != 1 {
						b.Fatalf("%d output documents, want 1 group", out.Len())
					}
				}
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

func BenchmarkGroupUpdate(b *testing.B) {
	for _, s := range groupSpecs {
		for _, g := range groupSizes {
			b.Run(fmt.Sprintf("%s/G=%d", s.name, g), func(b *testing.B) {
				runUpdates(b, compileBench(b, s.spec, "Pod"), "Pod", benchPods(g, 1), nil)
			})
		}
	}
}
