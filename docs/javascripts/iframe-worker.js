// The manual read from a file (file://, as the README says to read it): a page there may
// not start a web worker, so the search's worker script runs in a hidden frame of the page
// instead, with the same messages both ways. Served over HTTP, nothing here runs.
(function () {
  "use strict";
  if (location.protocol !== "file:") {
    return;
  }

  class FrameWorker extends EventTarget {
    constructor(url) {
      super();
      this.ready = false;
      this.waiting = [];
      this.frame = document.createElement("iframe");
      this.frame.hidden = true;
      (document.body || document.documentElement).appendChild(this.frame);
      const inner = this.frame.contentWindow;
      // what the worker posts comes to the page's listeners, a turn later, as from a worker
      inner.postMessage = (data) => {
        setTimeout(() => this.dispatchEvent(new MessageEvent("message", { data })));
      };
      const script = inner.document.createElement("script");
      script.src = new URL(url, location.href).href;
      script.onload = () => {
        this.ready = true;
        for (const data of this.waiting.splice(0)) {
          this.deliver(data);
        }
      };
      inner.document.head.appendChild(script);
    }

    deliver(data) {
      const inner = this.frame.contentWindow;
      inner.dispatchEvent(new inner.MessageEvent("message", { data }));
    }

    postMessage(data) {
      if (this.ready) {
        setTimeout(() => this.deliver(data));
      } else {
        this.waiting.push(data);
      }
    }

    terminate() {
      this.frame.remove();
    }
  }

  window.Worker = FrameWorker;
})();
