package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// idleRSSBound is the most an idle `dctl start` (no controller) may hold
// resident once it has released its start-up pages (README, Performance):
// it held 65 MB before it released them.
const idleRSSBound = 45 << 20

// TestIdleManagerResidentSet runs `dctl start` with no Operator and no hook
// controller against the suite's cluster: it releases the pages only
// start-up used before the manager starts ("before start") and, among
// others, once --release-startup-pages-after (5 s here, 10 s by default)
// has passed since its informers synced ("5s after sync"), logged in that
// order; after that last release its resident set, sampled every second
// for 5 s, stays under idleRSSBound. The executable is in the page cache
// (just built), so the kernel maps whole 64 KiB windows around each page
// touched: the most it maps.
func TestIdleManagerResidentSet(t *testing.T) {
	cmd := exec.Command(dctlBin, "start", "--metrics-addr", "0", "--health-addr", "0", "--api-server-addr", "127.0.0.1:0",
		"-v", "1", "--release-startup-pages-after", "5s")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	released := make(chan string, 1)
	var beforeStart atomic.Bool // the release before the manager's start was logged
	var logTail []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if len(logTail) < 200 {
				logTail = append(logTail, line)
			}
			if strings.Contains(line, "released the pages only start-up used") && strings.Contains(line, "before start") {
				beforeStart.Store(true)
			}
			if strings.Contains(line, "released the pages only start-up used") && strings.Contains(line, "after sync") {
				select {
				case released <- line:
				default:
				}
			}
		}
	}()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		waited := make(chan error, 1)
		go func() { <-done; waited <- cmd.Wait() }()
		select {
		case <-waited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
	}()
	// The release comes about 5 s after the informers' sync; the resident
	// set is measured in any case a minute after the start at the latest.
	note := "after the release"
	select {
	case line := <-released:
		t.Log(line)
		if !beforeStart.Load() {
			t.Errorf("no release of the start-up pages before the manager's start was logged before the one after the sync")
		}
	case <-time.After(time.Minute):
		note = "a minute after the start, without a release of the start-up pages"
	}
	var peak, anon, file int64
	for i := 0; i < 5; i++ {
		time.Sleep(time.Second)
		rss, err := procStatus(cmd.Process.Pid, "VmRSS:")
		if err != nil {
			t.Fatal(err)
		}
		if rss > peak {
			peak = rss
			anon, _ = procStatus(cmd.Process.Pid, "RssAnon:")
			file, _ = procStatus(cmd.Process.Pid, "RssFile:")
		}
	}
	t.Logf("idle dctl start: peak VmRSS %.1f MiB (RssAnon %.1f MiB, RssFile %.1f MiB) over 5 s %s",
		float64(peak)/(1<<20), float64(anon)/(1<<20), float64(file)/(1<<20), note)
	if peak > idleRSSBound {
		t.Fatalf("idle dctl start holds %.1f MiB resident %s, more than %d MiB", float64(peak)/(1<<20), note, idleRSSBound>>20)
	}
}
