// A client system signing its users in with express-openid-connect (npm install express express-openid-connect).
// Register it first: auth-admin client create --name "My app" --callback-url "$APP_URL/callback" --post-logout-redirect-uri "$APP_URL"
import express from 'express';
import expressOpenIdConnect from 'express-openid-connect';

const { auth, requiresAuth } = expressOpenIdConnect;
const app = express();
app.use(auth({
  issuerBaseURL: process.env.AUTH_URL, // the service's PUBLIC_URL
  baseURL: process.env.APP_URL, // this application, e.g. http://localhost:3000
  clientID: process.env.CLIENT_ID,
  clientSecret: process.env.CLIENT_SECRET,
  secret: process.env.APP_SESSION_SECRET, // this application's own cookie key, 32+ characters
  authRequired: false,
  authorizationParams: { response_type: 'code', scope: 'openid profile email' },
}));
app.get('/', requiresAuth(), (req, res) => res.json(req.oidc.user));
app.listen(Number(new URL(process.env.APP_URL).port || 3000), () => console.log(`listening on ${process.env.APP_URL}`));
