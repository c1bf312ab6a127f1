// The paste boxes (home, /search/) take words too: Enter sends the form, as in the header's box;
// Shift+Enter starts a new line (a pasted log keeps its lines either way).
(function () {
  Array.prototype.forEach.call(document.querySelectorAll("form.big-search textarea"), function (box) {
    box.addEventListener("keydown", function (ev) {
      if (ev.key !== "Enter" || ev.shiftKey || ev.isComposing || ev.keyCode === 229) return;
      ev.preventDefault();
      if (box.form.requestSubmit) box.form.requestSubmit(); else box.form.submit();
    });
  });
})();
