/* GraphiQL for hybridfeed: this project's own file (not vendored; refresh.sh leaves it).
 *
 * Queries and mutations: HTTP POST to the endpoint, with the Headers pane's headers as
 * request headers (GraphiQL's own fetcher). Subscriptions: the graphql-ws client
 * (graphql-transport-ws) on the same origin's endpoint, with the Headers pane's JSON as the
 * `connection_init` payload, so `{"Authorization": "Bearer <token>"}` authenticates both.
 *
 * The URL's fragment carries GraphiQL's classic parameters, `query`, `variables`,
 * `operationName` and `headers` (`/graphql#query=...&headers=...`), to fill the editors and
 * share links; edits to the first three are written back to it. A fragment rather than the
 * search string: `GET /graphql?query=...` is a GraphQL request (the server runs it), and a
 * fragment never reaches the server or its logs. `headers` is read once and then removed
 * from the address bar, so a token does not linger in history or in copied links (the
 * Headers pane itself is kept in this browser's localStorage).
 */
(function () {
  "use strict";

  var root = document.getElementById("graphiql");
  var endpoint = new URL(root.getAttribute("data-endpoint") || "/graphql", window.location.href);
  var socketUrl = new URL(endpoint.href);
  socketUrl.protocol = endpoint.protocol === "https:" ? "wss:" : "ws:";
  socketUrl.hash = "";

  var WELCOME = [
    "# hybridfeed GraphiQL",
    "#",
    "# 1. Get a token:",
    "#      mutation {",
    "#        logIn(handle: \"alice\", password: \"demo-password\") {",
    "#          token",
    "#        }",
    "#      }",
    "# 2. Put it in the Headers pane below:",
    "#      {\"Authorization\": \"Bearer <token>\"}",
    "#    Queries and mutations send it as an HTTP header,",
    "#    subscriptions as the websocket's connection_init.",
    "# 3. Live updates of your home feed:",
    "#      subscription {",
    "#        feedUpdates { newPostCount latestPostAt }",
    "#      }",
    "# 4. Your personalized (RANKED) feed, each post with why it is there",
    "#    (reason: FOLLOWED, RECOMMENDED or OWN; recommendations say who liked them):",
    "#      {",
    "#        feed(first: 10) {",
    "#          edges {",
    "#            reason",
    "#            recommendation { text }",
    "#            node { id body author { handle } }",
    "#          }",
    "#        }",
    "#      }",
    "#    setRecommendations(enabled: false) turns recommendations off.",
    "# 5. Negative feedback: hide a post, mute an author (not a block:",
    "#    they are told nothing; unmuteAuthor undoes it). On a recommended",
    "#    post, showFewerLikeThis(postId: ...) hides it and demotes its kind.",
    "#      mutation {",
    "#        hidePost(id: \"<post id>\")",
    "#        muteAuthor(handle: \"bob\") { handle viewerMutes }",
    "#      }",
    "# 6. An image post: createUpload says where to PUT the bytes (JPEG, PNG,",
    "#    WebP or GIF; byteSize is the file's size), you PUT the file there with",
    "#    exactly the headers it lists (curl -T: docs/API.md, \"Image posts\"),",
    "#    then createPost attaches the upload (up to 4, each with alt text):",
    "#      mutation StartUpload {",
    "#        createUpload(contentType: \"image/png\", byteSize: 48213) {",
    "#          id url headers { name value } expiresAt",
    "#        }",
    "#      }",
    "#      mutation PostImage {",
    "#        createPost(body: \"At the harbour\", media: [",
    "#          {uploadId: \"<upload id>\", alt: \"Boats moored at dusk\"}",
    "#        ]) {",
    "#          id media { url width height contentType alt }",
    "#        }",
    "#      }",
    "",
    "{",
    "  viewer {",
    "    handle",
    "    displayName",
    "  }",
    "}",
    "",
  ].join("\n");

  // ---- URL parameters (in the fragment) ------------------------------------------------
  var params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
  function param(name) {
    var value = params.get(name);
    return value === null || value === "" ? undefined : value;
  }
  var initial = {
    query: param("query"),
    variables: param("variables"),
    operationName: param("operationName"),
    headers: param("headers"),
  };
  function writeUrl() {
    var fragment = params.toString();
    var url = window.location.pathname + window.location.search + (fragment ? "#" + fragment : "");
    window.history.replaceState(null, "", url);
  }
  function setParam(name, value) {
    if (value) {
      params.set(name, value);
    } else {
      params.delete(name);
    }
    writeUrl();
  }
  if (params.has("headers")) {
    params.delete("headers");
    writeUrl();
  }

  // ---- Subscriptions over graphql-transport-ws -----------------------------------------
  // The text being sent decides, parsed with the graphql-js inside GraphiQL's bundle (its
  // own parse of the editor is debounced, so it can lag behind a quick paste-and-run).
  function isSubscription(graphQLParams) {
    var graphql = GraphiQL.GraphQL;
    try {
      var ast = graphql.parse(graphQLParams.query);
      var operation = graphql.getOperationAST(ast, graphQLParams.operationName || undefined);
      return Boolean(operation) && operation.operation === "subscription";
    } catch (error) {
      return false; // not GraphQL: the server says why, over HTTP
    }
  }

  // What the result pane shows when the socket fails: a GraphQL-style errors list (an Error
  // object would be shown with its stack).
  function failure(error) {
    if (Array.isArray(error)) {
      return { errors: error }; // the operation's GraphQL errors
    }
    if (error && typeof error.code === "number") {
      // A CloseEvent: the server's close code and reason are the useful part.
      var reason = (error.reason || "").replace(/\.$/, "");
      var message = "The websocket closed with " + error.code + (reason ? ": " + reason : "") + ".";
      if (error.code === 4403) {
        message += " Subscriptions authenticate with the Headers pane, sent as the " +
          'connection_init payload: {"Authorization": "Bearer <token>"}.';
      }
      return { errors: [{ message: message, extensions: { closeCode: error.code } }] };
    }
    return { errors: [{ message: error instanceof Error ? error.message : String(error) }] };
  }

  // One client per Headers pane content: a socket authenticates once, at connection_init.
  var socket = { key: null, client: null };
  function clientFor(headers) {
    var key = JSON.stringify(headers);
    if (socket.key !== key) {
      if (socket.client) {
        socket.client.dispose();
      }
      socket.key = key;
      socket.client = graphqlWs.createClient({
        url: socketUrl.href,
        connectionParams: headers,
        // A refused token (4403) will not get better by retrying; show it at once.
        shouldRetry: function (event) {
          return !(event && event.code === 4403);
        },
      });
    }
    return socket.client;
  }

  function subscribe(graphQLParams, headers) {
    var client = clientFor(headers);
    return {
      subscribe: function (observer) {
        var dispose = client.subscribe(graphQLParams, {
          next: function (result) {
            observer.next(result);
          },
          error: function (error) {
            observer.next(failure(error));
            observer.complete();
          },
          complete: function () {
            observer.complete();
          },
        });
        return { unsubscribe: dispose };
      },
    };
  }

  // ---- The fetcher: GraphiQL's documented extension point ------------------------------
  var httpFetcher = GraphiQL.createFetcher({ url: endpoint.href });
  function fetcher(graphQLParams, options) {
    var headers = (options && options.headers) || {};
    if (isSubscription(graphQLParams)) {
      return subscribe(graphQLParams, headers);
    }
    return httpFetcher(graphQLParams, options);
  }

  ReactDOM.createRoot(root).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultQuery: WELCOME,
      query: initial.query,
      variables: initial.variables,
      operationName: initial.operationName,
      headers: initial.headers,
      onEditQuery: function (value) {
        setParam("query", value === WELCOME ? "" : value);
      },
      onEditVariables: function (value) {
        setParam("variables", value);
      },
      onEditOperationName: function (value) {
        setParam("operationName", value);
      },
      isHeadersEditorEnabled: true,
      shouldPersistHeaders: true,
      defaultEditorToolsVisibility: "headers",
      inputValueDeprecation: true,
    })
  );
})();
