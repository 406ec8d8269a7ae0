// Starts Swagger UI on the coordinator's own OpenAPI document. It lives in its
// own file because the page's Content-Security-Policy allows no inline script.
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    // Relative, so the UI also works behind a proxy that adds a path prefix.
    url: "../openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    // The default validator badge is an image from validator.swagger.io; the
    // UI must not reach beyond the coordinator.
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: "StandaloneLayout"
  });
});
