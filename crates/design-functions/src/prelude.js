// The sandbox of one design document: the globals CouchDB's query server
// gives design functions (emit, sum, log, toJSON, isArray, require...) and
// the entry points Recliner calls. Entry points take and return JSON text
// and never throw: the answer is {"ok": value}, {"error": [name, reason]}
// (a JavaScript error, or CouchDB's ["error", name, reason] form) or
// {"thrown": value} (anything else a function threw, such as
// {forbidden: "..."} from validate_doc_update).

var __couch = (function () {
  var ddoc = null;
  var compiled = {};
  var modules = {};
  var emitted = null;
  // The section ("nouveau" or "indexes") of the search index function
  // running, and the host's ends of index(), kept from design functions.
  var indexing = null;
  var indexHost = {
    begin: __couch_index_begin,
    field: __couch_index_field,
    done: __couch_index_done
  };
  delete globalThis.__couch_index_begin;
  delete globalThis.__couch_index_field;
  delete globalThis.__couch_index_done;

  // An argument of index() of the wrong type: CouchDB's TypeError.
  function mustBe(what, expected, value) {
    if (typeof value !== expected) {
      throw new TypeError("type of " + what + " must be a " + expected + " not " + typeof value);
    }
  }

  function isError(e) {
    return e !== null && typeof e === "object" && "name" in e && "message" in e && "stack" in e;
  }

  // The engine's own failure, not the function's: memory ran out (an
  // InternalError, or null when not even an error could be made). A map
  // function's exception skips its document; this fails the whole batch,
  // so the index does not move past a document it could not map.
  function isFatal(e) {
    return e === null || e === undefined ||
      (isError(e) && e.name === "InternalError" && String(e.message).indexOf("out of memory") >= 0);
  }

  function answer(build) {
    var result;
    try {
      result = { ok: build() };
    } catch (e) {
      result = failure(e);
    }
    try {
      return JSON.stringify(result);
    } catch (e) {
      return JSON.stringify({ error: ["unnamed_error", String(e)] });
    }
  }

  // As answer, for a build that returns the JSON text of its value (so
  // that its parts are written, and may fail, one by one).
  function answerText(build) {
    try {
      return '{"ok":' + build() + "}";
    } catch (e) {
      try {
        return JSON.stringify(failure(e));
      } catch (e2) {
        return JSON.stringify({ error: ["unnamed_error", String(e2)] });
      }
    }
  }

  // What a thrown value answers.
  function failure(e) {
    if (isError(e)) {
      return { error: [String(e.name), String(e.message)] };
    }
    if (Array.isArray(e) && e.length === 3 && (e[0] === "error" || e[0] === "fatal")) {
      return { error: [String(e[1]), String(e[2])] };
    }
    return { thrown: e === undefined ? null : e };
  }

  // Documents are read-only to map functions: one view cannot change
  // what the next one sees.
  function freeze(value) {
    if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
      Object.freeze(value);
      for (var k in value) {
        if (Object.prototype.hasOwnProperty.call(value, k)) {
          freeze(value[k]);
        }
      }
    }
    return value;
  }

  var providers = [];
  // A list function's state: text sent since the last row, the head given
  // to start() (and whether it is still to go out), the provider's content
  // type, whether rows were asked for.
  var chunks = [];
  var started = null;
  var newHead = false;
  var responseType = null;
  var inList = false;
  var gotRow = false;
  var lastRow = false;

  // The names `provides` and `registerType` know, each with its MIME types
  // (the first is the one answered), and back from each type to its name.
  // As in CouchDB, a registration lasts as long as the sandbox, and the
  // last one of a type wins.
  var typesByName = {};
  var nameByType = {};
  function register(name, types) {
    typesByName[name] = types;
    for (var i = 0; i < types.length; i++) {
      nameByType[types[i]] = name;
    }
  }
  register("all", ["*/*"]);
  register("text", ["text/plain; charset=utf-8", "txt"]);
  register("html", ["text/html; charset=utf-8"]);
  register("xhtml", ["application/xhtml+xml", "xhtml"]);
  register("xml", ["application/xml", "text/xml", "application/x-xml"]);
  register("js", ["text/javascript", "application/javascript", "application/x-javascript"]);
  register("css", ["text/css"]);
  register("ics", ["text/calendar"]);
  register("csv", ["text/csv"]);
  register("rss", ["application/rss+xml"]);
  register("atom", ["application/atom+xml"]);
  register("yaml", ["application/x-yaml", "text/yaml"]);
  register("multipart_form", ["multipart/form-data"]);
  register("url_encoded_form", ["application/x-www-form-urlencoded"]);
  register("json", ["application/json", "text/x-json"]);

  // A media type or range: [type, subtype, parameters]; a range's `q` is
  // 1 unless it is a number from 0 to 1.
  function mediaRange(text) {
    var parts = text.split(";");
    var params = {};
    for (var i = 1; i < parts.length; i++) {
      var pair = parts[i].split("=");
      if (pair.length === 2) {
        params[pair[0].trim()] = pair[1].trim();
      }
    }
    var full = parts[0].trim();
    if (full === "*") {
      full = "*/*";
    }
    var q = params.q === undefined ? NaN : parseFloat(params.q);
    params.q = isNaN(q) || q < 0 || q > 1 ? "1" : params.q;
    var kinds = full.split("/");
    return [kinds[0], kinds[1], params];
  }

  // How well the ranges of an Accept header take a type: [fitness, q]
  // of the range that fits it best (a type, subtype and each parameter
  // in common add to the fitness), [-1, 0] when none does.
  function fitness(type, ranges) {
    var target = mediaRange(type);
    var best = -1;
    var bestQ = 0;
    for (var i = 0; i < ranges.length; i++) {
      var range = ranges[i];
      var typeFits = range[0] === target[0] || range[0] === "*" || target[0] === "*";
      var subFits = range[1] === target[1] || range[1] === "*" || target[1] === "*";
      if (!typeFits || !subFits) {
        continue;
      }
      var score = (range[0] === target[0] ? 100 : 0) + (range[1] === target[1] ? 10 : 0);
      for (var p in target[2]) {
        if (p !== "q" && range[2][p] && range[2][p] === target[2][p]) {
          score += 1;
        }
      }
      if (score > best) {
        best = score;
        bestQ = range[2].q;
      }
    }
    return [best, parseFloat(bestQ)];
  }

  // The type of `types` an Accept header takes best, "" when it takes
  // none. Candidates are ordered as CouchDB orders them (JavaScript's
  // default sort, which compares their texts), the last one wins.
  function bestType(types, accept) {
    var ranges = accept.split(",").map(mediaRange);
    var scored = [];
    for (var i = 0; i < types.length; i++) {
      scored.push([fitness(types[i], ranges), i, types[i]]);
    }
    scored.sort();
    var top = scored[scored.length - 1];
    return top && top[0][1] ? top[2] : "";
  }

  // The provider the request asks for: `?format=` by name, else the best
  // type for its Accept header, else the first registered; the answer's
  // type goes to responseType. None: CouchDB's 406 `not_acceptable`.
  function chooseProvider(request) {
    var name = null;
    var accept = request.headers && request.headers.Accept;
    if (request.query && request.query.format) {
      name = request.query.format;
      if (typesByName[name] === undefined) {
        throw new TypeError("cannot read property of undefined");
      }
      responseType = typesByName[name][0];
    } else if (accept) {
      // Later providers first, as in CouchDB (and the list stays so).
      providers.reverse();
      var supported = [];
      for (var i = 0; i < providers.length; i++) {
        supported = supported.concat(typesByName[providers[i][0]] || []);
      }
      responseType = bestType(supported, accept);
      name = nameByType[responseType];
    } else {
      name = providers[0][0];
      responseType = (typesByName[name] || [name])[0];
    }
    for (var j = 0; j < providers.length; j++) {
      if (name !== undefined && providers[j][0] === name) {
        return providers[j];
      }
    }
    var offered = providers.map(function (p) {
      return (typesByName[p[0]] || []).join(", ") || p[0];
    });
    throw ["error", "not_acceptable",
      "Content-Type " + (accept || name) + " not supported, try one of: " + offered.join(", ")];
  }

  // A list's head goes out with its first row (or at its end), the
  // provider's content type in it unless start() named one.
  function sendStart() {
    var head = started || {};
    head.headers = head.headers || {};
    if (responseType && !head.headers["Content-Type"]) {
      head.headers["Content-Type"] = responseType;
    }
    __couch_list_send("start", JSON.stringify(head), chunks.join(""));
    chunks = [];
    started = null;
    newHead = false;
  }

  // Text sent since the last row, with the head start() gave since, if
  // any: the answer takes it if it has not begun (CouchDB's way to set
  // a list's status and headers after reading rows).
  function sendChunks(text) {
    if (newHead) {
      __couch_list_send("start", JSON.stringify(started || {}), text);
      newHead = false;
    } else {
      __couch_list_send("chunks", "", text);
    }
  }

  // What a render function threw, as CouchDB reports it: its own error
  // as it is, anything else as a `render_error`.
  function renderError(e) {
    if ((e !== null && typeof e === "object" && e.error && e.reason) ||
      (Array.isArray(e) && (e[0] === "error" || e[0] === "fatal"))) {
      throw e;
    }
    var message = "function raised error: " + String(e) + " \nstacktrace: " +
      (e !== null && typeof e === "object" ? e.stack : undefined);
    __couch_log(message);
    throw ["error", "render_error", message];
  }

  // A show or update result as a response object (nothing: one without
  // a body, which CouchDB answers as JSON).
  function response(result) {
    if (result === undefined || result === null) {
      return {};
    }
    if (typeof result === "string") {
      return { body: result };
    }
    return result;
  }

  function getRowOfList() {
    if (lastRow) {
      return null;
    }
    if (!gotRow) {
      gotRow = true;
      sendStart();
    } else {
      sendChunks(chunks.join(""));
      chunks = [];
    }
    var row = __couch_list_row();
    if (row === null || row === undefined) {
      lastRow = true;
      return null;
    }
    return JSON.parse(row);
  }

  function compile(source, label) {
    if (typeof source !== "string") {
      throw ["error", "not_found", "missing function " + label];
    }
    var fun;
    try {
      // A script whose value is the function, as CouchDB evaluates it:
      // `function(doc) {...};` compiles (see source.rs).
      fun = (0, eval)(__couch_script(source));
    } catch (e) {
      throw ["error", "compilation_error", String(e) + " (" + source + ")"];
    }
    if (typeof fun !== "function") {
      throw ["error", "compilation_error", "Expression does not eval to a function. (" + source + ")"];
    }
    return fun;
  }

  // The function at `path` (["filters", "name"]), compiled once.
  function lookup(path) {
    var key = path.join("\u0000");
    if (compiled.hasOwnProperty(key)) {
      return compiled[key];
    }
    var at = ddoc;
    for (var i = 0; i < path.length; i++) {
      at = at !== null && typeof at === "object" ? at[path[i]] : undefined;
      if (at === undefined) {
        throw ["error", "not_found",
          "missing " + path[0] + " function " + path[path.length - 1] + " on design doc " + ddoc._id];
      }
    }
    var fun = compile(at, path.join("."));
    compiled[key] = fun;
    return fun;
  }

  // CommonJS modules stored in the design document, by path from its root
  // ("lib/util") or from the requiring module ("./util", "../other").
  function resolve(name, from) {
    var parts = name.split("/");
    var at = parts[0] === "." || parts[0] === ".." ? from.slice(0, -1) : [];
    for (var i = 0; i < parts.length; i++) {
      if (parts[i] === "." || parts[i] === "") {
        continue;
      }
      if (parts[i] === "..") {
        if (at.length === 0) {
          throw ["error", "invalid_require_path", "Object has no parent: " + name];
        }
        at.pop();
      } else {
        at.push(parts[i]);
      }
    }
    var source = ddoc;
    for (var j = 0; j < at.length; j++) {
      source = source !== null && typeof source === "object" ? source[at[j]] : undefined;
      if (source === undefined) {
        throw ["error", "invalid_require_path", "Object has no property \"" + at[j] + "\" (require('" + name + "'))"];
      }
    }
    if (typeof source !== "string") {
      throw ["error", "invalid_require_path", "Must require a JavaScript string, not: " + typeof source];
    }
    return { id: at.join("/"), path: at, source: source };
  }

  function requireFrom(from) {
    return function (name) {
      var found = resolve(String(name), from);
      if (modules.hasOwnProperty(found.id)) {
        return modules[found.id].exports;
      }
      var module = { id: found.id, exports: {} };
      // Registered before it runs: circular requires see the exports so far.
      modules[found.id] = module;
      try {
        var body = (0, eval)("(function (module, exports, require) {" + found.source + "\n})");
        body.call(module.exports, module, module.exports, requireFrom(found.path));
      } catch (e) {
        delete modules[found.id];
        // A module it requires failed, or the call ran out of time or
        // memory: that error as it is, never wrapped once per level.
        if (isArray(e) || (isError(e) && e.name === "InternalError")) {
          throw e;
        }
        throw ["error", "compilation_error",
          "Module require('" + name + "') raised error " + (isError(e) ? e.name + ": " + e.message : JSON.stringify(e))];
      }
      return module.exports;
    };
  }

  return {
    init: function (ddocJson) {
      return answer(function () {
        ddoc = JSON.parse(ddocJson);
        return true;
      });
    },

    // validate_doc_update(newDoc, oldDoc, userCtx, secObj), with the
    // design document as `this`.
    validate: function (newDoc, oldDoc, userCtx, secObj) {
      return answer(function () {
        var fun = lookup(["validate_doc_update"]);
        fun.call(ddoc, JSON.parse(newDoc), JSON.parse(oldDoc), JSON.parse(userCtx), JSON.parse(secObj));
        return 1;
      });
    },

    // filters.name(doc, req) for each document: whether it passes.
    filter: function (name, docs, req) {
      return answer(function () {
        var fun = lookup(["filters", name]);
        var list = JSON.parse(docs);
        var request = JSON.parse(req);
        var passed = [];
        for (var i = 0; i < list.length; i++) {
          passed.push(fun.call(ddoc, list[i], request) ? true : false);
        }
        return passed;
      });
    },

    // views.name.map(doc) for each document: whether it emits anything.
    filterView: function (name, docs) {
      return answer(function () {
        var fun = lookup(["views", name, "map"]);
        var list = JSON.parse(docs);
        var passed = [];
        for (var i = 0; i < list.length; i++) {
          emitted = [];
          try {
            fun.call(ddoc, list[i]);
            passed.push(emitted.length > 0);
          } finally {
            emitted = null;
          }
        }
        return passed;
      });
    },

    // views.<name>.map for each view and each document: what each emits
    // (a function that throws emits nothing for that document, as in
    // CouchDB; the error is logged).
    map: function (names, docs) {
      return answerText(function () {
        var views = JSON.parse(names);
        var funs = [];
        for (var v = 0; v < views.length; v++) {
          funs.push(lookup(["views", views[v], "map"]));
        }
        // One document a line. The batch is read and written whole; when
        // that fails (a document nested past JavaScript's stack), again
        // document by document, and the one JavaScript cannot take is
        // skipped alone and logged, as a map function that throws.
        var lines = docs === "" ? [] : docs.split("\n");
        var list = null;
        try {
          list = JSON.parse("[" + lines.join(",") + "]");
        } catch (e) {
          list = null;
        }
        var none = "[" + funs.map(function () { return "[]"; }).join(",") + "]";
        var out = [];
        for (var i = 0; i < lines.length; i++) {
          var doc;
          try {
            doc = freeze(list === null ? JSON.parse(lines[i]) : list[i]);
          } catch (e) {
            if (isFatal(e)) {
              throw e;
            }
            __couch_log("document skipped by every map function: " + String(e));
            out.push(null);
            continue;
          }
          var perView = [];
          for (var f = 0; f < funs.length; f++) {
            emitted = [];
            try {
              funs[f].call(ddoc, doc);
              perView.push(emitted);
            } catch (e) {
              if (isFatal(e)) {
                throw e;
              }
              __couch_log("function raised exception " + (isError(e) ? e.name + ": " + e.message : JSON.stringify(e)) +
                " with doc._id " + (doc && doc._id));
              perView.push([]);
            } finally {
              emitted = null;
            }
          }
          out.push(perView);
        }
        var skipped = out.indexOf(null) >= 0;
        if (!skipped) {
          try {
            return JSON.stringify(out);
          } catch (e) {
            // Rows too deep to write: document by document below.
          }
        }
        var texts = [];
        for (var j = 0; j < out.length; j++) {
          var text = none;
          if (out[j] !== null) {
            try {
              text = JSON.stringify(out[j]);
            } catch (e) {
              __couch_log("rows skipped, too deep to write: " + String(e));
            }
          }
          texts.push(text);
        }
        return "[" + texts.join(",") + "]";
      });
    },

    // A reduce function given by its source, on `[key, id]` pairs and
    // values (`keys` is null when re-reducing).
    reduce: function (source, keys, values, rereduce) {
      return answer(function () {
        var fun;
        if (compiled.hasOwnProperty("reduce\u0000" + source)) {
          fun = compiled["reduce\u0000" + source];
        } else {
          fun = compile(source, "reduce");
          compiled["reduce\u0000" + source] = fun;
        }
        var result;
        try {
          result = fun.call(ddoc, JSON.parse(keys), JSON.parse(values), rereduce === "true");
        } catch (e) {
          // As CouchDB: a reduce function that throws gives null, logged.
          __couch_log("reduce function raised exception " + (isError(e) ? e.name + ": " + e.message : JSON.stringify(e)));
          result = null;
        }
        return result === undefined ? null : result;
      });
    },

    // Whether a function's source compiles (design documents are checked
    // when written, as CouchDB checks them).
    compileCheck: function (source) {
      return answer(function () {
        compile(source, "function");
        return true;
      });
    },

    // shows.name(doc, req): the response object ({body|json|base64,
    // code, headers}); a string is the body. `provides(type, fun)` picks
    // by the request's `format` or Accept header.
    show: function (name, doc, req) {
      return answer(function () {
        var fun = lookup(["shows", name]);
        var request = JSON.parse(req);
        var subject = JSON.parse(doc);
        providers = [];
        chunks = [];
        started = null;
        responseType = null;
        try {
          var resp = response(fun.call(ddoc, subject, request) || {});
          // send() and start() work in a show too, as in CouchDB: what
          // was sent comes first, and each member given to start() is a
          // header.
          if (chunks.length > 0) {
            resp.headers = resp.headers || {};
            for (var h in started || {}) {
              resp.headers[h] = started[h];
            }
            resp.body = chunks.join("") + (resp.body || "");
            chunks = [];
            started = null;
          }
          if (providers.length > 0) {
            var out = response(chooseProvider(request)[1].call(ddoc) || {});
            resp.body = (resp.body || "") + chunks.join("") + (out.body || "");
            resp.headers = resp.headers || {};
            if (responseType && !resp.headers["Content-Type"]) {
              resp.headers["Content-Type"] = responseType;
            }
          }
          if (resp === null || Array.isArray(resp) || (typeof resp !== "object" && typeof resp !== "string")) {
            throw ["error", "render_error", "undefined response from show function"];
          }
          return resp;
        } catch (e) {
          // A show of a document that does not exist, which the function
          // could not render: 404, as CouchDB answers.
          if (subject === null && request.path && request.path.length > 5) {
            throw ["error", "not_found", "document not found"];
          }
          renderError(e);
        } finally {
          chunks = [];
          started = null;
        }
      });
    },

    // updates.name(doc, req): [the document to save or null, the response].
    // GET is refused by the function's side, as CouchDB's.
    update: function (name, doc, req) {
      return answer(function () {
        var fun = lookup(["updates", name]);
        var request = JSON.parse(req);
        try {
          if (request.method === "GET" || request.method === "HEAD") {
            throw ["error", "method_not_allowed", "Update functions do not allow GET"];
          }
          var result = fun.call(ddoc, JSON.parse(doc), request);
          var resp = result[1];
          if (resp === null || Array.isArray(resp) || (typeof resp !== "object" && typeof resp !== "string")) {
            throw ["error", "render_error", "undefined response from update function"];
          }
          return [result[0] === undefined ? null : result[0], response(resp)];
        } catch (e) {
          renderError(e);
        }
      });
    },

    // rewrites(req), the function form of `rewrites`: null when it gives
    // nothing, a string as {path, method}, else what it returned. What it
    // throws is CouchDB's rewrite_error, unless it names its own error.
    rewrite: function (req) {
      return answer(function () {
        var fun = lookup(["rewrites"]);
        var request = JSON.parse(req);
        var result;
        try {
          result = fun.call(ddoc, request);
        } catch (e) {
          var named = e !== null && typeof e === "object" && ((e.error && e.reason) ||
            (Array.isArray(e) && (e[0] === "error" || e[0] === "fatal")));
          if (named) {
            throw e;
          }
          var message = "function raised error: " + String(e) + " \nstacktrace: " +
            (e !== null && typeof e === "object" ? e.stack : undefined);
          __couch_log(message);
          throw ["error", "rewrite_error", message];
        }
        if (!result) {
          return null;
        }
        if (typeof result === "string") {
          return { path: result, method: request.method };
        }
        return result;
      });
    },

    // lists.name(head, req) over a view's rows, which getRow() reads one
    // at a time from the host; what send() gathered goes out at each row.
    list: function (name, head, req) {
      return answer(function () {
        var fun = lookup(["lists", name]);
        var request = JSON.parse(req);
        chunks = [];
        started = null;
        newHead = false;
        providers = [];
        responseType = null;
        gotRow = false;
        lastRow = false;
        inList = true;
        try {
          var tail = fun.call(ddoc, JSON.parse(head), request);
          if (providers.length > 0) {
            tail = chooseProvider(request)[1].call(ddoc);
          }
          if (!gotRow) {
            getRowOfList();
          }
          if (tail !== undefined && tail !== null) {
            chunks.push(String(tail));
          }
          // A head given after the last row goes out with the tail.
          if (newHead) {
            sendChunks(chunks.join(""));
            return "";
          }
          return chunks.join("");
        } catch (e) {
          renderError(e);
        } finally {
          inList = false;
          chunks = [];
          newHead = false;
        }
      });
    },

    getRow: function () {
      if (!inList) {
        return null;
      }
      return getRowOfList();
    },

    send: function (chunk) {
      chunks.push(String(chunk));
    },

    start: function (head) {
      started = head || {};
      newHead = true;
    },

    registerType: function (name, types) {
      register(name, types);
    },

    provides: function (type, fun) {
      providers.push([type, fun]);
    },

    // <section>.<name>.index for each search index and each document
    // (`section`: "nouveau", or "indexes" for `_search`). The fields go to
    // the host as index() names them ([type, name, value, store, facet,
    // searchable]), each function's kept when it returns and dropped when
    // it throws: a function that throws leaves the document out of that
    // index, as CouchDB; the error is logged.
    index: function (sectionJson, names, docs) {
      return answer(function () {
        var section = JSON.parse(sectionJson);
        var list = JSON.parse(names);
        var funs = [];
        for (var n = 0; n < list.length; n++) {
          funs.push(lookup([section, list[n], "index"]));
        }
        indexHost.begin(funs.length);
        var lines = docs === "" ? [] : docs.split("\n");
        for (var i = 0; i < lines.length; i++) {
          var doc;
          try {
            doc = freeze(JSON.parse(lines[i]));
          } catch (e) {
            __couch_log("document skipped by every index function: " + String(e));
            for (var skipped = 0; skipped < funs.length; skipped++) {
              indexHost.done(i, false);
            }
            continue;
          }
          for (var f = 0; f < funs.length; f++) {
            var kept = false;
            indexing = section;
            try {
              funs[f].call(ddoc, doc);
              kept = true;
            } catch (e) {
              __couch_log("function raised exception " + (isError(e) ? e.name + ": " + e.message : JSON.stringify(e)) +
                " with doc._id " + (doc && doc._id));
            } finally {
              indexing = null;
            }
            indexHost.done(i, kept);
          }
        }
        return null;
      });
    },

    // `index(...)` inside a search index function: Nouveau's
    // index(type, name, value[, {store}]), or Clouseau's
    // index(name, value[, {store, index, facet}]) in `indexes`.
    indexField: function (first, second, third, fourth) {
      if (indexing === null) {
        throw new Error("index() is only available in a search index function");
      }
      if (indexing === "nouveau") {
        var type = first, name = second, value = third, options = fourth || {};
        mustBe("type", "string", type);
        mustBe("name", "string", name);
        if (name.substring(0, 1) === "_") {
          var reserved = new Error("name must not start with an underscore");
          reserved.name = "ReservedName";
          throw reserved;
        }
        switch (type) {
          case "text":
          case "string":
            mustBe("value", "string", value);
            break;
          case "double":
            mustBe("value", "number", value);
            break;
          case "stored":
            if (typeof value !== "string" && typeof value !== "number") {
              throw new TypeError("type of value must be a string or number not " + typeof value);
            }
            break;
          default:
            throw new TypeError(type + " not supported");
        }
        indexHost.field(type, name, value, options.store === true, options.facet === true, true);
        return;
      }
      var fieldName = first, fieldValue = second, opts = third || {};
      mustBe("name", "string", fieldName);
      if (typeof fieldValue === "boolean") {
        fieldValue = fieldValue ? "true" : "false";
      }
      if (typeof fieldValue !== "string" && typeof fieldValue !== "number") {
        throw new TypeError("value must be a string, a number or boolean not " + typeof fieldValue);
      }
      indexHost.field("auto", fieldName, fieldValue, opts.store === true || opts.store === "yes",
        opts.facet === true, opts.index !== false && opts.index !== "no");
    },

    emit: function (key, value) {
      if (emitted === null) {
        throw new Error("emit() is only available in a map function");
      }
      emitted.push([key === undefined ? null : key, value === undefined ? null : value]);
    },

    require: function (name) {
      return requireFrom([])(name);
    }
  };
})();

function emit(key, value) {
  __couch.emit(key, value);
}

function index(first, second, third, fourth) {
  __couch.indexField(first, second, third, fourth);
}

function sum(values) {
  var total = 0;
  for (var i = 0; i < values.length; i++) {
    total += values[i];
  }
  return total;
}

function log(message) {
  __couch_log(typeof message === "string" ? message : JSON.stringify(message));
}

function toJSON(value) {
  return JSON.stringify(value);
}

function isArray(value) {
  return Array.isArray(value);
}

function require(name) {
  return __couch.require(name);
}

function provides(type, fun) {
  __couch.provides(type, fun);
}

function getRow() {
  return __couch.getRow();
}

function send(chunk) {
  __couch.send(chunk);
}

function start(head) {
  __couch.start(head);
}

function registerType(name) {
  __couch.registerType(name, Array.prototype.slice.call(arguments, 1));
}
